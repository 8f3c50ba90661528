"""Run a checkpoint's recompute in the contextvars context of its forward.

Mechanism (torch 2.12+): Dynamo / Inductor / ``torch.compiler`` config overrides are ContextVars
(``torch/utils/_config_module.py``, PR #173568), so each thread sees its own. Non-reentrant
checkpoint recomputes inside the saved-tensor unpack hook, i.e. on whatever thread runs that
backward node; for CUDA tensors that is the autograd engine's device worker thread, whose context is
empty, so the recompute read the defaults (pytorch#186537). Capturing ``contextvars.copy_context()``
when ``_CheckpointFrame`` is built (on the forward thread, O(1)) and running ``recompute_fn`` in a
*copy* of it (a Context cannot be entered by two threads at once, and two backward passes of one
frame may overlap) makes every ContextVar the forward saw, not only three named settings, visible
to the recompute on any thread.

Cost (this runs once per checkpoint frame and once per recompute, i.e. per layer per micro-batch):
both paths are O(1) and independent of the process's history. The frame wrapper makes three C
calls (``is_compiling``, two dispatch-mode reads, bound once when the patch is applied), one
``copy_context()`` and one ``threading.get_ident()``; the recompute remembers three plain integers
(:func:`explain.dynamo_marks`) and runs ``copy().run()``. Everything the error explanation needs
beyond those integers (thread names, Dynamo's graph-break reasons, the SAC storage) is read only
when the "not found in storage" error is raised. Measured by ``benchmarks/recompute_overhead.py``.

Hazards:

* Every forward ContextVar is replayed, including any a user changed on purpose between forward and
  backward (a ``config.patch`` around ``backward()`` no longer reaches the recompute; the forward's
  value wins). ContextVars set *inside* the recompute do not leak out of it.
* The captured context keeps the forward's ContextVar values alive until the frame is freed (after
  backward); torch's own are small (config values, flags).
* Frames built while compiling (``torch.compiler.is_compiling()``, or a ProxyTorchDispatchMode active,
  i.e. AOTAutograd tracing ``tag_activation_checkpoint``, or a FakeTensorMode active, i.e. Dynamo's
  fake run of the checkpoint body, which 2.12's ``is_compiling()`` does not flag) are left untouched. ``is_compiling()`` is
  process-global in 2.13+ (``_compile_session_context``), so a frame built while *another* thread
  compiles is also left untouched (it behaves as without the fix).
* Reentrant checkpoint (``use_reentrant=True``) builds no ``_CheckpointFrame`` and is not covered.
* The forward thread is remembered by its ident; the explanation names it only if that thread is
  still known to ``threading`` when the error is raised (else it prints the ident).

Report (``torchfix_core.report()``, :data:`ACTED`): ``recompute-in-forward-context`` counts each
recompute run in a copy of its forward's context (one dict increment in
:meth:`ForwardContextRecompute.__call__`); ``explained-replay-error`` each SAC "not found in
storage" error re-raised with the explanation appended (detail: the op the recompute missed).
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable

from torchfix_core.tallies import tally

from torchfix_sac_replay import explain

#: What the fix did in this process (``torchfix_core.report()``); declared at 0 on import.
ACTED = tally("sac-replay", "recompute-in-forward-context", "explained-replay-error")
COUNTS = ACTED.counts


class ForwardContextRecompute:
    """Callable stored as ``_CheckpointFrame.recompute_fn``: the original recompute, run in a copy of
    the forward's context, with SAC replay errors explained (same exception type, original chained).

    ``forward_thread`` is the forward thread's ``threading.get_ident()`` (a name costs a Python
    property call per frame; it is looked up only for the error message)."""

    __slots__ = ("recompute_fn", "forward_context", "forward_thread", "__weakref__")

    def __init__(
        self, recompute_fn: Callable[..., Any], forward_context: contextvars.Context, forward_thread: int
    ) -> None:
        self.recompute_fn = recompute_fn
        self.forward_context = forward_context
        self.forward_thread = forward_thread

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        COUNTS["recompute-in-forward-context"] += 1
        before = explain.dynamo_marks()  # three ints, O(1): never walks Dynamo's counters
        try:
            return self.forward_context.copy().run(self.recompute_fn, *args, **kwargs)
        except RuntimeError as exc:
            if not explain.is_storage_miss(exc):
                raise
            try:
                message = str(exc) + explain.describe(
                    exc,
                    forward_context=self.forward_context,
                    here_context=contextvars.copy_context(),
                    forward_thread=explain.thread_name(self.forward_thread),
                    recompute_thread=threading.current_thread().name,
                    before=before,
                    after=explain.dynamo_marks(),
                )
                new = explain.explained(exc, message)
            except Exception:  # noqa: BLE001 - the explanation is best effort; the original goes on
                new = None
            if new is None:
                raise
            ACTED.note("explained-replay-error", str(exc).split(" ", 1)[0])
            raise new from exc


def compile_path_check() -> Callable[[], bool]:
    """A zero-argument callable, true while torch.compile / export traces (the checkpoint is being
    compiled, not run). The torch functions it calls are bound once here, so a call costs three C
    calls and no attribute lookups; build it when torch is imported (at patch time)."""
    import torch

    is_compiling = torch.compiler.is_compiling
    get_mode = torch._C._get_dispatch_mode
    keys = torch._C._TorchDispatchModeKey
    # PROXY: AOTAutograd tracing tag_activation_checkpoint; FAKE: Dynamo's fake-tensor run of the
    # checkpoint body, where torch <= 2.12's is_compiling() is still False (nothing real runs there)
    proxy, fake = keys.PROXY, keys.FAKE

    def in_compile_path() -> bool:
        return is_compiling() or get_mode(proxy) is not None or get_mode(fake) is not None

    return in_compile_path


def in_compile_path() -> bool:
    """True while torch.compile / export traces (see :func:`compile_path_check`; not the hot path)."""
    return compile_path_check()()


def make_frame_init(original: Callable[..., None]) -> Callable[..., None]:
    """Wrapper for ``_CheckpointFrame.__init__(self, recompute_fn, early_stop, unpack_error_cb, metadata_fn)``."""
    compiling = compile_path_check()
    copy_context = contextvars.copy_context
    get_ident = threading.get_ident

    def __init__(self: Any, recompute_fn: Any, early_stop: Any, unpack_error_cb: Any, metadata_fn: Any) -> None:
        if callable(recompute_fn) and not compiling():
            recompute_fn = ForwardContextRecompute(recompute_fn, copy_context(), get_ident())
        original(self, recompute_fn, early_stop, unpack_error_cb, metadata_fn)

    return __init__
