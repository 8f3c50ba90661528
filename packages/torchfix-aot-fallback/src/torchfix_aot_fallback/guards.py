"""Guard-miss fallback for AOT artifacts (``AOTCompiledFunction.__call__``).

A loaded (or freshly AOT-compiled) artifact checks its guards on every call and raises
``RuntimeError("GuardManager check failed, reason: ...")`` *before running anything* when the
inputs differ from the ones it was compiled for (another shape, dtype, placement or world size).
With the fix applied, such a call is served by a JIT ``torch.compile`` of the original function
(built once per artifact, warned once), unless strict mode is on. Only a guard miss raised by the
artifact's own ``__call__`` frame qualifies; any error from inside the compiled code propagates.

The original function: the one passed to ``aot_compile`` (remembered on the artifact by the
patched ``aot_compile_fullgraph`` or by ``load_or_compile``), else rebuilt from the artifact's
``original_code`` and closure with the ``f_globals`` given to ``load_compiled_function`` or, failing
that, the namespace of the loaded module whose file defines the code. When no such namespace
exists the guard miss propagates (a JIT without the right globals would be wrong).
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any, Callable

from torchfix_aot_fallback import fallback, policy

SOURCE_ATTR = "_torchfix_source_fn"
JIT_ATTR = "_torchfix_jit"


def _rebuild(artifact: Any) -> Callable[..., Any] | None:
    arts = getattr(artifact, "_artifacts", None)
    code = getattr(arts, "original_code", None)
    if not isinstance(code, types.CodeType):
        return None
    f_globals = getattr(artifact, "_extra_globals", None) or None
    if f_globals is None:
        for module in list(sys.modules.values()):
            if getattr(module, "__file__", None) == code.co_filename:
                f_globals = vars(module)
                break
    if f_globals is None:
        return None
    env = getattr(arts, "runtime_env", None)
    closure = getattr(env, "closure", None) or None
    if code.co_freevars and (closure is None or len(closure) != len(code.co_freevars)):
        return None
    return types.FunctionType(code, f_globals, code.co_name, None, closure)


def jit_for(artifact: Any) -> Callable[..., Any] | None:
    jit = artifact.__dict__.get(JIT_ATTR)
    if jit is None:
        source = artifact.__dict__.get(SOURCE_ATTR) or _rebuild(artifact)
        if source is None:
            return None
        backend = artifact.__dict__.get("_torchfix_backend") or _backend_by_name(artifact)
        jit = fallback.make_jit(source, backend, None)
        artifact.__dict__[JIT_ATTR] = jit
    return jit  # type: ignore[no-any-return]


def _backend_by_name(artifact: Any) -> Any:
    import torch

    name = getattr(getattr(artifact, "_artifacts", None), "backend_name", None)
    try:
        known = torch._dynamo.list_backends(exclude_tags=())
    except Exception:  # noqa: BLE001
        known = []
    return name if name in known else "inductor"


def make_call_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``AOTCompiledFunction.__call__``: on its own guard miss, run the JIT stand-in."""
    own_code = original.__code__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except RuntimeError as exc:
            if not policy.is_guard_miss(exc) or not _raised_by(exc, own_code) or policy.is_strict():
                raise
            jit = jit_for(self)
            if jit is None:
                raise
            cause = guard_cause(exc)
            name = fallback.name_of(self.__dict__.get(SOURCE_ATTR) or self)
            if not self.__dict__.get("_torchfix_guard_warned"):
                self.__dict__["_torchfix_guard_warned"] = True
                rec = fallback.FallbackRecord("guard-miss", name, cause)
                fallback.note(
                    rec,
                    f"torchfix aot-fallback: the AOT artifact of {name} does not match these inputs ({cause}); "
                    f"serving them with JIT torch.compile. {policy.STRICT_ENV}=1 makes this an error",
                )
        return jit(*args, **kwargs)

    return __call__


def guard_cause(exc: BaseException) -> str:
    """``GuardManager check failed: <first failing guard>`` from a guard-miss error."""
    match = re.search(r"verbose_code_parts=\[\s*(['\"])(.*?)\1", str(exc), re.S)
    return f"GuardManager check failed: {match.group(2)[:200]}" if match else "GuardManager check failed"


def _raised_by(exc: BaseException, code: types.CodeType) -> bool:
    """True when ``exc`` was raised directly in a frame running ``code`` (not deeper)."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and last.tb_frame.f_code is code
