"""Which exceptions mean "AOT is unsupported for this model" (fall back) and which must propagate.

Measured on torch 2.13.0 and 2.15.0 CPU (see ``docs/fixes/aot-fallback.md``):

* graph breaks, data-dependent branching, "Attempted to read undefined local variable" and every
  other ``unimplemented(...)`` raise :class:`torch._dynamo.exc.Unsupported` (a ``RuntimeError``);
* a backend whose result cannot be serialized raises ``RuntimeError("... does not implement
  SerializableCallable.")``; a graph the AOTAutograd cache refuses raises ``BypassAOTAutogradCache``
  (``aot_compile_fullgraph`` runs with ``strict_autograd_cache=True``);
* on the AOT path a backend's ``AssertionError`` / ``torch.OutOfMemoryError`` arrive **bare**
  (``OutOfMemoryError`` *is* a ``RuntimeError``); on the JIT path they arrive wrapped in
  ``BackendCompilerFailed`` with the original in ``.inner_exception`` and ``__cause__ = None``;
* an exception the model raises itself while being traced arrives as ``Unsupported`` whose
  ``__cause__`` is an ``ObservedException`` (``ObservedValueErrorError``,
  ``ObservedKeyboardInterruptError``, ...): it is a user error, not an AOT limitation;
* misuse (``fullgraph=False``, ``force_disable_caches``), shape errors (``TorchRuntimeError``) and
  ``FXGraphCacheMiss`` under ``strict_precompile`` (a required cache hit) are plain errors.

Only the first group falls back. The decision walks ``inner_exception``, ``__cause__`` and
``__context__`` so that a wrapped or chained OOM/AssertionError is never swallowed (the bug of a
bare ``except RuntimeError``, MagiCompiler PR #89 review).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, NamedTuple

from torchfix_aot_fallback.package import MEMO, STRICT

STRICT_ENV = STRICT.name
MEMO_ENV = MEMO.name

_NOT_SERIALIZABLE = "does not implement SerializableCallable"
_GUARD_MISS = "GuardManager check failed"


class Verdict(NamedTuple):
    """Result of :func:`classify`: ``fallback`` is True only when JIT is a safe substitute."""

    fallback: bool
    reason: str


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception reachable through inner_exception/__cause__/__context__."""
    todo: list[BaseException | None] = [exc]
    seen: set[int] = set()
    out: list[BaseException] = []
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        out.append(cur)
        inner = getattr(cur, "inner_exception", None)
        todo += [inner if isinstance(inner, BaseException) else None, cur.__cause__, cur.__context__]
    return out


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` of the innermost interesting exception (for logs)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {first[:200]}"


def _fatal(exc: BaseException) -> str | None:
    """Why ``exc`` must propagate whatever wraps it, or None."""
    import torch

    if not isinstance(exc, Exception):
        return f"{type(exc).__name__} is not an Exception"
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "out of memory"
    if isinstance(exc, AssertionError):
        return "AssertionError"
    name = type(exc).__name__
    if name == "FXGraphCacheMiss":
        return "a required cache hit failed (FXGraphCacheMiss)"
    exc_mod = _dynamo_exc()
    if exc_mod is not None and isinstance(exc, getattr(exc_mod, "ObservedException", ())):
        return "the model itself raised while being traced (ObservedException)"
    return None


def _dynamo_exc():  # type: ignore[no-untyped-def]
    import sys

    return sys.modules.get("torch._dynamo.exc")


def classify(exc: BaseException) -> Verdict:
    """Decide whether an exception from an AOT compile means "AOT unsupported, JIT is fine".

    Returns ``Verdict(True, cause)`` for Dynamo ``Unsupported`` (graph breaks, unsupported
    constructs), non-serializable backend results and AOTAutograd cache bypasses; ``Verdict(False,
    why)`` for everything else, in particular when an OOM, an ``AssertionError``, a
    ``BaseException`` that is not an ``Exception``, a user exception observed during tracing or a
    required-cache miss appears anywhere in the chain.
    """
    chain = _chain(exc)
    for link in chain:
        why = _fatal(link)
        if why is not None:
            return Verdict(False, f"{why} ({describe(link)})")
    exc_mod = _dynamo_exc()
    unsupported = getattr(exc_mod, "Unsupported", None) if exc_mod is not None else None
    user_error = getattr(exc_mod, "UserError", None) if exc_mod is not None else None
    if user_error is not None and isinstance(exc, user_error):
        return Verdict(False, f"user error ({describe(exc)})")
    if unsupported is not None and isinstance(exc, unsupported):
        return Verdict(True, describe(exc))
    if isinstance(exc, RuntimeError) and _NOT_SERIALIZABLE in str(exc):
        return Verdict(True, describe(exc))
    if type(exc).__name__ in ("BypassAOTAutogradCache", "BypassFxGraphCache"):
        return Verdict(True, describe(exc))
    return Verdict(False, f"not an 'AOT unsupported' error ({describe(exc)})")


def is_guard_miss(exc: BaseException) -> bool:
    """True for the ``RuntimeError`` an ``AOTCompiledFunction`` raises when its guards reject the inputs."""
    return type(exc) is RuntimeError and str(exc).startswith(_GUARD_MISS)


# -- strict mode --------------------------------------------------------------------------------
_strict_override: bool | None = None
_local = threading.local()


def is_strict() -> bool:
    """True when no fallback may happen: ``strict()`` context, :func:`set_strict`,
    ``TORCHFIX_AOT_FALLBACK_STRICT=1``, or torch's own ``torch._dynamo.config.strict_precompile``
    (``TORCH_STRICT_PRECOMPILE=1``)."""
    local = getattr(_local, "strict", None)
    if local is not None:
        return bool(local)
    if _strict_override is not None:
        return _strict_override
    if STRICT.is_on():
        return True
    import sys

    config = sys.modules.get("torch._dynamo.config")
    return bool(getattr(config, "strict_precompile", False))


def set_strict(value: bool | None) -> None:
    """Process-wide strict switch; ``None`` returns to the environment variable."""
    global _strict_override
    _strict_override = value


@contextlib.contextmanager
def thread_setting(local: threading.local, name: str, value: object) -> Iterator[None]:
    """``local.<name> = value`` for the current thread inside the ``with`` block, then back to what
    it was (unset: None). The one form of this package's per-thread switches: :func:`strict` and
    :func:`torchfix_aot_fallback.fallback.outer_policy`."""
    old = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield
    finally:
        setattr(local, name, old)


def strict(value: bool = True) -> contextlib.AbstractContextManager[None]:
    """Strict (or, with ``False``, permissive) for the current thread inside the ``with`` block."""
    return thread_setting(_local, "strict", value)


def memo_enabled() -> bool:
    """``TORCHFIX_AOT_FALLBACK_MEMO=0`` turns the persistent failure memo off (default on)."""
    return MEMO.is_on()


def classify_load_error(exc: BaseException) -> bool:
    """True when a failed artifact load may be answered by compiling again (never for OOM,
    AssertionError or non-``Exception`` errors anywhere in the chain)."""
    return all(_fatal(link) is None for link in _chain(exc))


def classify_save_error(exc: BaseException) -> bool:
    """True when a failed artifact save may be downgraded to a warning (same rule as loads)."""
    return classify_load_error(exc)
