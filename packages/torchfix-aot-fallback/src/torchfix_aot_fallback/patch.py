"""Implementation of the aot-fallback fix: two patch points in ``torch._dynamo.aot_compile``.

1. ``aot_compile_fullgraph(model, example_inputs, hooks, backend, dynamic=None)`` (module
   attribute). ``torch.compile(fn, fullgraph=True).aot_compile(inputs)`` is a closure created in
   ``_TorchDynamoContext.__call__`` (``_dynamo/eval_frame.py``; 2.10 ``:814``, 2.11 ``:855``, 2.12
   ``:850``, 2.13 ``:945``, 2.14.1 ``:1012``, 2.15 ``:1026``) that runs ``from
   torch._dynamo.aot_compile import aot_compile_fullgraph`` *at call time*, so replacing the module
   attribute reaches it and direct callers alike. The probe checks that binding on the live code
   object. Calls from ``aot_compile_module`` (``OptimizedModule._aot_compile``) never fall back:
   ``AOTCompiledModel`` needs real ``AOTCompiledFunction`` results.
2. ``AOTCompiledFunction.__call__(self, *args, **kwargs)``: a guard miss of the artifact (loaded
   with ``torch.compiler.load_compiled_function`` or fresh) is served by JIT (:mod:`.guards`).

Hazard: code that bound ``aot_compile_fullgraph`` by name before the fix was applied keeps the
original. The trigger ``torch._dynamo.aot_compile`` is imported by ``import torch._dynamo``, never
by activation. Upstream: no torch issue; MagiCompiler PR #89 is the design anchor.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult

from torchfix_aot_fallback import fallback, guards

FULLGRAPH_PARAMS = ("model", "example_inputs", "hooks", "backend", "dynamic")
CALL_PARAMS = ("self", "args", "kwargs")


def _closure_code() -> types.CodeType | None:
    """The code object of the ``aot_compile`` closure inside ``_TorchDynamoContext.__call__``."""
    from torch._dynamo import eval_frame

    ctx = getattr(eval_frame, "_TorchDynamoContext", None)
    call = vars(ctx).get("__call__") if isinstance(ctx, type) else None
    todo = [getattr(call, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == "aot_compile":
                    return const
                todo.append(const)
    return None


def make_fullgraph_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def aot_compile_fullgraph(
        model: Any,
        example_inputs: Any,
        hooks: Any,
        backend: Any,
        dynamic: Any = None,
    ) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__")
        if caller == "torch._dynamo.aot_compile":  # aot_compile_module: needs real artifacts
            return original(model, example_inputs, hooks, backend, dynamic)
        result = fallback.run(
            lambda: original(model, example_inputs, hooks, backend, dynamic),
            model,
            example_inputs,
            backend,
            dynamic,
        )
        if not isinstance(result, fallback.JITFallback):
            try:
                result.__dict__[guards.SOURCE_ATTR] = model
                result.__dict__["_torchfix_backend"] = backend
            except AttributeError:
                pass
        return result

    return aot_compile_fullgraph


class AOTFallbackFix(Fix):
    """AOT compile falls back to JIT when (and only when) AOT is unsupported for the model."""

    def probe(self) -> ProbeResult:
        import torch
        import torch._dynamo.aot_compile as aot

        fn = aot.__dict__.get("aot_compile_fullgraph")
        if not isinstance(fn, types.FunctionType):
            raise PatchRefused("torch._dynamo.aot_compile.aot_compile_fullgraph is not a Python function")
        cls = getattr(aot, "AOTCompiledFunction", None)
        if not isinstance(cls, type) or not isinstance(cls.__dict__.get("__call__"), types.FunctionType):
            raise PatchRefused("torch._dynamo.aot_compile.AOTCompiledFunction.__call__ is missing")
        if "_guard_check_enabled" not in getattr(cls, "__dataclass_fields__", {}):
            raise PatchRefused("AOTCompiledFunction has no _guard_check_enabled field: unknown layout")
        closure = _closure_code()
        if closure is None or "aot_compile_fullgraph" not in closure.co_names:
            raise PatchRefused(
                "torch.compile(...).aot_compile no longer imports aot_compile_fullgraph at call time; "
                "patching the module attribute would not reach it"
            )
        if not hasattr(torch.compiler, "load_compiled_function"):
            raise PatchRefused("torch.compiler.load_compiled_function is missing")
        enabled = bool(getattr(torch._dynamo.config, "enable_aot_compile", False))
        note = (
            ""
            if enabled
            else " (torch._dynamo.config.enable_aot_compile is False by default here: .aot_compile exists only once it is set)"
        )
        return ProbeResult(
            True,
            "torch AOT compile has no JIT fallback; wrapping aot_compile_fullgraph and AOTCompiledFunction.__call__"
            + note,
        )

    def runtime_note(self) -> str:
        """The fallbacks so far (shown by ``status()`` and doctor after the probe's reason)."""
        return fallback.summary()

    def apply(self) -> None:
        import torch._dynamo.aot_compile as aot

        self.patches.wrap(aot, "aot_compile_fullgraph", make_fullgraph_wrapper, signature=FULLGRAPH_PARAMS)
        self.patches.wrap(aot.AOTCompiledFunction, "__call__", guards.make_call_wrapper, signature=CALL_PARAMS)
