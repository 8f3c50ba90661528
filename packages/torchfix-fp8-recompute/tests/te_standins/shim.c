/* STAND-IN, NOT TRANSFORMER ENGINE: the compiled module ``transformer_engine_torch`` for CPU tests.
 *
 * TE's loader (transformer_engine/common/__init__.py ``load_framework_extension`` in 2.x,
 * transformer_engine/pytorch/__init__.py ``_load_library`` in 1.x) finds a file named
 * ``transformer_engine_torch*.so`` and loads it as an extension module. This shim is that file:
 * its init function creates the extension module and fills it with the names of the Python
 * stand-in ``transformer_engine_torch_standin`` (same directory, put on sys.path by install.py's
 * .pth file). Mirrors TE 1.13.0 and 2.1.0 - 2.20.2; see that module's docstring.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef standin_def = {
    PyModuleDef_HEAD_INIT, "transformer_engine_torch",
    "Stand-in for TransformerEngine's compiled PyTorch extension (torchfix CPU tests).", -1, NULL,
};

PyMODINIT_FUNC PyInit_transformer_engine_torch(void) {
    PyObject *module = PyModule_Create(&standin_def);
    if (module == NULL) return NULL;
    PyObject *impl = PyImport_ImportModule("transformer_engine_torch_standin");
    if (impl == NULL) { Py_DECREF(module); return NULL; }
    PyObject *names = PyObject_GetAttrString(impl, "__all__");
    if (names == NULL) { Py_DECREF(impl); Py_DECREF(module); return NULL; }
    Py_ssize_t n = PySequence_Size(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PySequence_GetItem(names, i);
        PyObject *value = name ? PyObject_GetAttr(impl, name) : NULL;
        if (value == NULL || PyObject_SetAttr(module, name, value) < 0) {
            Py_XDECREF(name); Py_XDECREF(value); Py_DECREF(names); Py_DECREF(impl); Py_DECREF(module);
            return NULL;
        }
        Py_DECREF(name); Py_DECREF(value);
    }
    PyObject_SetAttrString(module, "__all__", names);
    Py_DECREF(names);
    Py_DECREF(impl);
    return module;
}
