"""Print, as one JSON line, where each installed fix patches on this torch: ``{fix id: {"state": ...,
"reason": ..., "points": [...], "touched": [...], "hidden": [...]}}``.

Run in a fresh interpreter with every fix distribution importable and ``TORCHFIX_AUTOLOAD=0``
(tests/combinations/test_combinations.py does). The trigger modules of every fix are imported
first (those of absent libraries skipped); then each fix, **alone**, is applied through
``torchfix_core.apply(only=[id])``, its live patches are read (``torchfix_core.testing.live_patches``)
and named (``selection.point_names``, ``selection.touched_module``), and it is reverted (exact: the
originals are back) before the next one. One at a time, because two fixes at one attribute would not
both apply together (the patching layer refuses to wrap another fix's wrapper): the full set would
hide the very overlap this looks for. A fix that is not applied here (not needed, out of range,
library missing) patches nothing on this torch, and has no points.

``hidden``: the guard of the suite's argument (docs/design.md, "Combination suite": a fix reaches
other code only through its live patches). Around each apply, every callable in the dicts of the
patched libraries' modules and of their classes (functions, classes, methods, static/class methods,
properties, and each function's ``__code__``) is snapshotted; one that changed and is not a live
patch of the fix is listed. The suite fails on any.

``reach``: where each live patch can be met (``selection.FixFacts.reach``, :func:`reach_of`).

``python _patch_points.py --apply-imports ID``: in a fresh interpreter, import ID's trigger modules,
apply ID alone and print (one JSON line) the modules its apply imported beyond them.
"""

from __future__ import annotations

import json
import sys
import types
import warnings

import torch  # noqa: F401 - what the fixes patch
import torchfix_core
from selection import _qualified, point_names, touched_module
from torchfix_core.testing import fix_spec, import_triggers, live_patches

#: the libraries whose callables the guard watches (what the fixes patch)
WATCHED = ("torch", "transformer_engine", "magi_compiler")


def _watched_modules() -> list[tuple[str, types.ModuleType]]:
    return [
        (name, module)
        for name, module in list(sys.modules.items())
        if isinstance(module, types.ModuleType) and name.split(".")[0] in WATCHED
    ]


def _callable_state(value: object) -> tuple[object, object]:
    """What identifies a callable's behaviour here: the object, and its function's code object."""
    target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    if isinstance(target, property):
        target = target.fget
    code = getattr(target, "__code__", None) if isinstance(target, types.FunctionType) else None
    return (value, code)


def _same(a: tuple[object, object], b: tuple[object, object]) -> bool:
    return a[0] is b[0] and a[1] is b[1]


def _is_watched_callable(value: object) -> bool:
    return isinstance(value, (types.FunctionType, type, staticmethod, classmethod, property, types.BuiltinFunctionType))


def snapshot() -> dict[tuple[str, str], object]:
    """``(owner name, attribute) -> _callable_state`` of every watched module's and class's callables."""
    with warnings.catch_warnings():  # reading a deprecated alias warns
        warnings.simplefilter("ignore")
        return _snapshot()


def _snapshot() -> dict[tuple[str, str], object]:
    found: dict[tuple[str, str], object] = {}
    seen_classes: set[int] = set()
    for name, module in _watched_modules():
        for attr, value in list(vars(module).items()):
            if not _is_watched_callable(value):
                continue
            found[(name, attr)] = _callable_state(value)
            if isinstance(value, type) and id(value) not in seen_classes and value.__module__ == name:
                seen_classes.add(id(value))
                owner = f"{name}.{value.__qualname__}"
                for cattr, cvalue in list(vars(value).items()):
                    if _is_watched_callable(cvalue):
                        found[(owner, cattr)] = _callable_state(cvalue)
    return found


def _reaches(value: object, function: object) -> bool:
    """``value`` is ``function`` (or wraps it as a static/class method or a property's getter)."""
    target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    if isinstance(target, property):
        target = target.fget
    return target is function


def code_key(code: types.CodeType) -> str:
    """How the suite's recorder names a code object it saw run: ``file:first line:name``."""
    return f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}"


def _dynamo_meets_it_by_code(function: types.FunctionType) -> bool:
    """Dynamo, meeting ``function`` in traced code, either calls it as it is (a graph break: a
    skipped file's function) or traces its bytecode (inlines it), rather than handling it by
    identity (torch's rule tables, polyfills, in-graph functions). Then the function matters only
    where its code runs or is traced, both of which the suite's recorder sees. Unknown: False."""
    try:
        from torch._dynamo import trace_rules
        from torch._dynamo.variables import SkipFunctionVariable, UserFunctionVariable

        return trace_rules.lookup(function) in (SkipFunctionVariable, UserFunctionVariable)
    except (ImportError, AttributeError, TypeError, ValueError):  # another layout of Dynamo's rules: assume it may
        # know the function by identity
        return False


def innermost(function: types.FunctionType) -> types.FunctionType:
    """The function a chain of ``functools.wraps`` decorators (``__wrapped__``) ends in. torch's
    decorators (``torch.no_grad()``, ``torch._disable_dynamo``) share one wrapper code among every
    function they wrap, and call the wrapped function whenever they are called: the innermost
    function's code says where the decorated one ran."""
    seen = {id(function)}
    while isinstance(getattr(function, "__wrapped__", None), types.FunctionType):
        function = function.__wrapped__  # type: ignore[attr-defined]
        if id(function) in seen:  # a cycle: stop where it closes
            break
        seen.add(id(function))
    return function


def reach_of(owner: object, name: str, original: object) -> tuple[str, str, str]:
    """Where one live patch can be met (``selection.FixFacts.reach``):

    * ``("code", code_key, module)`` when what it replaces is a Python function (a module or class
      attribute, a static/class method, a read-only property's getter, a closure cell's function, a
      decorator's ``__wrapped__``, or a swapped ``__code__``) that Dynamo meets by its code: the
      patch can change a run only where that function's code (:func:`innermost` for a decorated
      one) runs or is traced (callers holding the original see the original);
    * ``("name", attribute, module)`` for any other attribute (a class, a module, a builtin, a
      value, a property with a setter, a function Dynamo knows by identity): met where code that
      ran names it (``co_names``, or a string constant such as ``"module.attribute"``) in a run
      that imported the module;
    * ``("module", module, module)`` where neither applies (a closure cell holding no function):
      met wherever the module is imported."""
    module = touched_module(owner, original)
    while module not in sys.modules and "." in module:  # a run's record lists sys.modules
        module = module.rpartition(".")[0]
    function: object = original
    if name == "__code__":
        function = owner
    elif isinstance(original, (staticmethod, classmethod)):
        function = original.__func__
    elif isinstance(original, property):
        function = original.fget if original.fset is None and original.fdel is None else None
    if isinstance(function, types.FunctionType) and _dynamo_meets_it_by_code(function):
        code = original if isinstance(original, types.CodeType) else innermost(function).__code__
        return ("code", code_key(code), module)
    if not isinstance(owner, types.CellType) and name.isidentifier():
        return ("name", name, module)
    return ("module", module, module)


def apply_imports(fix_id: str) -> dict[str, list[str]]:
    """What ``fix_id``'s apply loads beyond its trigger modules, in a fresh interpreter (in a run,
    a fix applies when its triggers are imported, whatever else is loaded): ``library``, the
    modules of the watched libraries it imports (an import of one can register operators,
    lowerings or config; one of another library, ``packaging`` or torchfix's own, changes nothing
    the libraries do); ``own``, every module of its own distribution's package loaded once it is
    applied (or found not needed: its probe ran), the declarations (``__init__``, ``package``,
    ``version``) included."""
    import_triggers(fix_id, ignore_missing=True)
    before = set(sys.modules)
    torchfix_core.apply(only=[fix_id])
    (row,) = [r for r in torchfix_core.status() if r.id == fix_id]
    top = fix_spec(fix_id).implementation.partition(":")[0].split(".")[0]
    return {
        "library": sorted(m for m in set(sys.modules) - before if m.split(".")[0] in WATCHED),
        "own": sorted(m for m in sys.modules if m == top or m.startswith(top + ".")),
        "state": [str(row.state)],
    }


def main() -> None:
    installed = [row.id for row in torchfix_core.status() if row.version is not None]
    import_triggers(ignore_missing=True)
    found: dict[str, dict[str, object]] = {}
    for fix_id in installed:
        before = snapshot()
        torchfix_core.apply(only=[fix_id])
        after = snapshot()
        (row,) = [r for r in torchfix_core.status() if r.id == fix_id]
        patches = live_patches(fix_id)
        points = sorted({n for patch in patches for n in point_names(*patch)})
        touched = sorted({touched_module(owner, original) for owner, _, original in patches})
        declared = {(_qualified(owner), name) for owner, name, _ in patches if name != "__code__"}
        swapped = [owner for owner, name, _ in patches if name == "__code__"]  # every reference sees it
        changed = {key for key, state in after.items() if key in before and not _same(before[key], state)}
        hidden = sorted(
            f"{owner}.{attr}"
            for owner, attr in changed - declared
            if not any(_reaches(after[(owner, attr)][0], function) for function in swapped)
        )
        found[fix_id] = {
            "state": str(row.state),
            "reason": str(row.reason),
            "points": points,
            "touched": touched,
            "hidden": hidden,
            "reach": sorted({reach_of(*patch) for patch in patches}),
        }
        torchfix_core.revert(only=[fix_id])
        leftover = live_patches(fix_id)
        assert not leftover, f"{fix_id}: patches left after revert: {leftover}"
    print(json.dumps(found, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--apply-imports"]:
        print(json.dumps(apply_imports(sys.argv[2])))
    else:
        main()
