"""The ``magi-cache-key`` fix: MagiCompiler's cache directory and AOT artifact path cover DTensor layouts.

The bug
    MagiCompiler names its compiled-artifact directory from a hash of its compile config, the Inductor
    config, the compiler hash and the traced source files (``MagiBackend._init_cache``,
    ``magi_compiler/magi_backend/magi_backend.py``, at 8e2e47c), and its AOT artifact from the entry
    point, model index, config and dynamic dims (``MagiCompileState.aot_compilation_path``). The
    placements of DTensor inputs are in neither. A SimpleFSDP-style module whose DTensor parameters go
    from ``Shard(0)`` (``fully_shard``: an all-gather in the graph) to ``Replicate()`` with unchanged
    source reuses the directory and loads the first layout's artifact. Measured on CPU, 2 ranks on
    gloo: 0 Inductor compiles and ``AssertionError: expected size 16==8, stride 8==8 at dim=0`` on
    torch 2.10 (SimpleFSDP's ``redistribute(...).to_local()``) and 2.11 (``full_tensor()``; there
    Dynamo's ``redistribute``/``to_local`` wrappers make the AOTAutograd cache bypass the graph, so
    Magi saves no artifact of it), and on 2.12/2.13 once Magi's load-time input-count check is
    neutralised (see below); upstream saw it on 8xH200 as a silent 1-rank all-gather.

The patch
    * ``MagiBackend.__call__(self, graph, example_inputs)`` is wrapped to compute
      :func:`torchfix_placement_cache.input_signature` of the DTensor example inputs (dtype,
      placements, mesh shape/dim names/device type, global and local shape and stride,
      ``requires_grad``) and ``MagiBackend._init_cache(self)`` to put the compiled artifacts in a
      ``torchfix-placement-<signature>`` sub-directory of the directory Magi chose (through that
      backend's own ``CompilerManager``; nothing global is redirected). Only DTensor inputs are hashed:
      never ``graph.code`` nor plain tensors or scalars, so a graph without DTensor inputs keeps its
      directory (no cache invalidation) and the second backend call of a
      ``TensorifyScalarRestartAnalysis`` retrace opens the same directory (MagiCompiler PR #89's
      constraint).
    * ``MagiCompileState.aot_compilation_path`` (a property) gets the same sub-directory, keyed on the
      DTensor parameters and buffers of the compiled ``nn.Module``: Magi looks the artifact up before
      it has traced anything, so the module's own DTensors (where SimpleFSDP/``fully_shard`` puts the
      placements) are what is known then. Hazard: DTensor *arguments* of an AOT entry point are not
      seen at that point and are not in the AOT key.

    Equal layouts give equal keys (warm starts and cross-rank sharing survive); the directories of
    different layouts never collide. The signature is computed once per backend call and once per AOT
    path lookup, never per training step.

Magi's load-time input-count check (not patched, by decision)
    ``InductorStandaloneAdaptor.load`` (``piecewise_compiler.py``) compares the arity of the saved
    Inductor ``call(self, args)`` with the number of example inputs and skips the load when they
    differ. On torch 2.12/2.13 a DTensor input is flattened for the compiled code into its local
    tensor *and* its device mesh, so the counts always differ and every DTensor artifact, correct or
    not, is recompiled (no warm start). Making the check count the flattened inputs would mean
    re-deriving AOTAutograd's subclass flattening, which differs between torch releases (2.10 and
    2.11 pass no mesh: the check passes there, and the wrong load shows with Magi untouched); a
    wrong count would turn a safe recompile into a load with the wrong calling convention. The check
    is Magi's; torchfix keeps it, and with this fix the directory is right once Magi counts correctly.

Upstream: MagiCompiler PR #89 (``compute_graph_hash(example_inputs)`` in the cache key).
"""

from __future__ import annotations

import functools
import itertools
import os
import types
from pathlib import Path
from typing import Any, Callable, Iterable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.tallies import tally_and_log

#: ``key-changed``: a backend's compiled-artifact directory got the DTensor layout sub-directory
#: (once per Magi backend call with DTensor inputs); ``aot-path-changed``: an AOT artifact path got
#: it (once per lookup of a module with DTensor parameters or buffers). Never per training step.
ACTED, log = tally_and_log("magi-cache-key", "key-changed", "aot-path-changed")
COUNTS = ACTED.counts

FIX_ID = "magi-cache-key"
PREFIX = "torchfix-placement-"
SIGNATURE_ATTR = "_torchfix_dtensor_signature"
CALL_PARAMS = ("self", "graph", "example_inputs")
INIT_CACHE_PARAMS = ("self",)


def dtensor_signature(values: Iterable[Any]) -> str | None:
    """16-hex-digit key of the DTensors among ``values`` (in order), or None when there are none."""
    from torch.distributed.tensor import DTensor

    from torchfix_placement_cache.signature import input_signature

    dtensors = [v for v in values if isinstance(v, DTensor)]
    if not dtensors:
        return None
    return input_signature(dtensors)[:16]


def module_signature(obj: Any) -> str | None:
    """:func:`dtensor_signature` of an ``nn.Module``'s parameters and buffers (None otherwise)."""
    import torch

    if not isinstance(obj, torch.nn.Module):
        return None
    tensors = itertools.chain(obj.named_parameters(), obj.named_buffers())
    return dtensor_signature(t for _, t in tensors)


def make_call_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, graph: Any, example_inputs: Any) -> Any:
        self.__dict__[SIGNATURE_ATTR] = dtensor_signature(example_inputs)
        return original(self, graph, example_inputs)

    return __call__


def make_init_cache_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _init_cache(self: Any) -> Any:
        signature = self.__dict__.get(SIGNATURE_ATTR)
        manager = getattr(self, "compiler_manager", None)
        if signature is None or manager is None:
            return original(self)
        chosen = manager.initialize_cache  # the bound method of this backend's own manager

        def initialize_cache(cache_dir: Path) -> Any:
            return chosen(Path(cache_dir) / f"{PREFIX}{signature}")

        manager.__dict__["initialize_cache"] = initialize_cache
        COUNTS["key-changed"] += 1
        try:
            result = original(self)
        finally:
            manager.__dict__.pop("initialize_cache", None)
        self.local_magi_cache_path = manager.cache_dir
        log.debug("magi-cache-key: artifacts of %s under %s", getattr(self, "model_tag", "?"), manager.cache_dir)
        return result

    return _init_cache


def make_aot_path_property(original: property) -> property:
    getter = original.fget
    assert getter is not None

    @functools.wraps(getter)
    def aot_compilation_path(self: Any) -> str:
        path = getter(self)
        signature = module_signature(getattr(self, "obj", None))
        if signature is None:
            return path  # type: ignore[no-any-return]
        directory = os.path.join(os.path.dirname(path), f"{PREFIX}{signature}")
        COUNTS["aot-path-changed"] += 1
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, os.path.basename(path))

    return property(aot_compilation_path, doc=original.__doc__)


def _params(func: Any) -> tuple[str, ...]:
    import inspect

    return tuple(inspect.signature(func).parameters)


def _names(func: Any) -> set[str]:
    import inspect

    code = getattr(inspect.unwrap(func), "__code__", None)
    return set(code.co_names) if isinstance(code, types.CodeType) else set()


class MagiCacheKeyFix(Fix):
    """Adds the DTensor input layout to MagiCompiler's cache directory and AOT path (see the module doc)."""

    def _layout(self) -> tuple[type, type]:
        from magi_compiler.magi_backend import magi_backend, magi_compiler_base

        backend = getattr(magi_backend, "MagiBackend", None)
        state = getattr(magi_compiler_base, "MagiCompileState", None)
        manager = getattr(magi_backend, "CompilerManager", None)
        if not (isinstance(backend, type) and isinstance(state, type) and isinstance(manager, type)):
            raise PatchRefused("MagiBackend / CompilerManager / MagiCompileState are not classes here")
        for owner, name, params in (
            (backend, "__call__", CALL_PARAMS),
            (backend, "_init_cache", INIT_CACHE_PARAMS),
            (manager, "initialize_cache", ("self", "cache_dir")),
        ):
            func = owner.__dict__.get(name)
            if not isinstance(func, types.FunctionType):
                raise PatchRefused(f"{owner.__name__}.{name} is not a Python function")
            if _params(func) != params:
                raise PatchRefused(f"{owner.__name__}.{name} has parameters {_params(func)}, expected {params}")
        if "initialize_cache" not in _names(backend.__dict__["_init_cache"]):
            raise PatchRefused(
                "MagiBackend._init_cache no longer hands its directory to CompilerManager.initialize_cache"
            )
        prop = state.__dict__.get("aot_compilation_path")
        if not isinstance(prop, property) or not isinstance(prop.fget, types.FunctionType):
            raise PatchRefused("MagiCompileState.aot_compilation_path is not a property")
        return backend, state

    def probe(self) -> ProbeResult:
        backend, state = self._layout()
        key_names = _names(backend.__dict__["_init_cache"])
        if {"compute_graph_hash", "example_inputs"} & key_names:
            return ProbeResult(False, "MagiBackend._init_cache already hashes the example inputs (MagiCompiler PR #89)")
        return ProbeResult(
            True,
            "MagiBackend._init_cache hashes config, compiler and traced sources only, and "
            "MagiCompileState.aot_compilation_path the entry and config: DTensor placements are in neither, "
            "so Shard(0) and Replicate() builds of one model share a directory",
        )

    def apply(self) -> None:
        backend, state = self._layout()
        self.patches.wrap(backend, "__call__", make_call_wrapper, signature=CALL_PARAMS)
        self.patches.wrap(backend, "_init_cache", make_init_cache_wrapper, signature=INIT_CACHE_PARAMS)
        original = state.__dict__["aot_compilation_path"]
        self.patches.replace(state, "aot_compilation_path", make_aot_path_property(original))
