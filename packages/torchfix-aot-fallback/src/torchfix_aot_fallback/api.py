"""Public API of torchfix-aot-fallback (imports torch lazily, inside the functions).

* :func:`fallbacks` / :func:`summary`: what fell back in this process (also in ``torchfix-doctor``).
* :func:`set_strict`, :func:`strict`, :func:`is_strict`: no fallback at all; the original error
  propagates (also ``TORCHFIX_AOT_FALLBACK_STRICT=1`` and torch's ``TORCH_STRICT_PRECOMPILE=1``).
* :func:`classify`: the policy's verdict on an exception.
* :func:`memo_dir`, :func:`set_memo_dir`, :func:`clear_memo`: the persistent failure memo
  (``TORCHFIX_AOT_FALLBACK_MEMO=0`` turns it off).
* :func:`load_or_compile`: build once, load many.
"""

from __future__ import annotations

import inspect
import logging
import os
import tempfile
from typing import Any, Callable

from torchfix_aot_fallback import fallback, guards, policy
from torchfix_aot_fallback.fallback import FallbackRecord, JITFallback, fallbacks, summary
from torchfix_aot_fallback.memo import clear_memo, memo_dir, set_memo_dir
from torchfix_aot_fallback.policy import Verdict, classify, is_strict, set_strict, strict

log = logging.getLogger("torchfix.aot-fallback")

__all__ = [
    "FallbackRecord",
    "JITFallback",
    "LoadedArtifact",
    "Verdict",
    "classify",
    "clear_memo",
    "fallbacks",
    "is_strict",
    "load_or_compile",
    "memo_dir",
    "set_memo_dir",
    "set_strict",
    "strict",
    "summary",
]


class LoadedArtifact:
    """An AOT artifact (``AOTCompiledFunction``) whose guard misses are served by JIT unless strict.

    Works whether or not the fix is applied (with it applied, the patched ``__call__`` already
    does the same). ``artifact`` is the underlying ``AOTCompiledFunction``.
    """

    def __init__(self, artifact: Any) -> None:
        self.artifact = artifact
        self._call_code = inspect.unwrap(type(artifact).__call__).__code__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.artifact(*args, **kwargs)
        except RuntimeError as exc:
            if not policy.is_guard_miss(exc) or not guards._raised_by(exc, self._call_code) or policy.is_strict():
                raise
            jit = guards.jit_for(self.artifact)
            if jit is None:
                raise
            name = fallback.name_of(self.artifact.__dict__.get(guards.SOURCE_ATTR) or self.artifact)
            fallback.note(
                fallback.FallbackRecord("guard-miss", name, guards.guard_cause(exc)),
                f"torchfix aot-fallback: the AOT artifact of {name} does not match these inputs; serving them with JIT",
            )
        return jit(*args, **kwargs)

    def save_compiled_function(self, path: str, external_data: Any = None) -> Any:
        return self.artifact.save_compiled_function(path, external_data)


def _compile_kwargs(backend: Any, dynamic: Any, mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    kw: dict[str, Any] = {"backend": backend, "dynamic": dynamic}
    if mode is not None:
        kw["mode"] = mode
    if options is not None:
        kw["options"] = options
    return kw


def load_or_compile(
    fn: Callable[..., Any],
    example_inputs: tuple[tuple[Any, ...], dict[str, Any]],
    path: str,
    *,
    backend: Any = "inductor",
    dynamic: bool | None = None,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    f_globals: dict[str, object] | None = None,
) -> Callable[..., Any]:
    """Load ``path`` if it holds a usable artifact, else AOT-compile ``fn`` and save it, else JIT.

    1. ``path`` exists: ``torch.compiler.load_compiled_function``; returns a :class:`LoadedArtifact`
       (guard misses -> JIT). A file that cannot be loaded (corrupt, other torch/system) is
       rebuilt, with a warning, unless strict (then the load error propagates).
    2. ``torch.compile(fn, fullgraph=True, ...).aot_compile(example_inputs)`` under the policy:
       "AOT unsupported" -> a :class:`JITFallback` (nothing saved; the memo skips the attempt in
       later processes); anything else propagates. On success the artifact is written atomically
       (temporary file + ``os.replace``, safe with concurrent ranks) and returned as a
       :class:`LoadedArtifact`. A save that fails is a warning (the in-memory artifact still
       works) unless strict.

    On torch where ``enable_aot_compile`` defaults to False (2.10, 2.11) it is enabled for this
    ``torch.compile`` call only.
    """
    import torch

    kw = _compile_kwargs(backend, dynamic, mode, options)
    strict_now = policy.is_strict()
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                artifact = torch.compiler.load_compiled_function(f, f_globals=f_globals)
        except Exception as exc:
            if strict_now or not policy.classify_load_error(exc):
                raise
            fallback.note(
                fallback.FallbackRecord("load", fallback.name_of(fn), policy.describe(exc)),
                f"torchfix aot-fallback: could not load {path} ({policy.describe(exc)}); compiling again",
            )
        else:
            artifact.__dict__[guards.SOURCE_ATTR] = fn
            artifact.__dict__["_torchfix_backend"] = backend
            return LoadedArtifact(artifact)
    with torch._dynamo.config.patch(enable_aot_compile=True):
        compiled: Any = torch.compile(fn, fullgraph=True, **kw)
    result = fallback.run(
        lambda: compiled.aot_compile(example_inputs),
        fn,
        example_inputs,
        backend,
        dynamic,
        jit=lambda: torch.compile(fn, **kw),
    )
    if isinstance(result, JITFallback):
        return result
    result.__dict__[guards.SOURCE_ATTR] = fn
    result.__dict__["_torchfix_backend"] = backend
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".aot", dir=directory)
        os.close(fd)
        try:
            result.save_compiled_function(tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except Exception as exc:
        if strict_now or not isinstance(exc, (OSError, RuntimeError)) or not policy.classify_save_error(exc):
            raise
        log.warning(
            "torchfix aot-fallback: could not save the AOT artifact of %s to %s (%s)",
            fallback.name_of(fn),
            path,
            policy.describe(exc),
        )
    return LoadedArtifact(result)
