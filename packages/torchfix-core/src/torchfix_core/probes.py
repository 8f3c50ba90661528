"""Probes on live torch objects shared by several fixes (never the version string).

Imported only by fix implementations when they are probed, never at activation: every function
imports torch inside. Side effects never outlive a call: probes run inside
``torch.utils._python_dispatch._disable_current_modes()`` and ``torch._C.DisableTorchFunction()``,
so an outer mode (a user's SAC forward, FakeTensorMode during the compile that imported the fix's
trigger, a logging TorchFunctionMode) never sees, records or stores the probe's op. Only the calling
thread's (thread-local) mode stacks are touched; the one tensor allocated is a 1-element CPU tensor.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from torchfix_core.patching import PatchRefused

_STRICT_MARK = "not found in storage"
#: the op the strict-replay probe runs under SAC replay without recording it (``torch.empty(1)``)
_PROBE_OP = "aten.empty.memory_format"


class ReplayBehaviour(NamedTuple):
    """Result of :func:`sac_replay_behaviour`."""

    strict: bool
    detail: str


def isolated(body: Callable[[], Any]) -> Any:
    """Run ``body`` with this thread's dispatch and torch-function modes out of the way."""
    import torch

    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:
        raise PatchRefused("torch.utils._python_dispatch._disable_current_modes does not exist") from None
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        return body()


def counting_mode() -> Any:
    """A plain TorchDispatchMode (``ignore_compile_internals()`` False) recording every op in ``.seen``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _SeenOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    return _SeenOps()


def sac_contexts() -> tuple[Any, Any]:
    """SAC's (recording, replay) context pair for a policy saving ``aten.mm``."""
    import torch

    try:
        from torch.utils.checkpoint import create_selective_checkpoint_contexts
    except ImportError:
        raise PatchRefused("torch.utils.checkpoint.create_selective_checkpoint_contexts does not exist") from None
    return create_selective_checkpoint_contexts([torch.ops.aten.mm.default])  # type: ignore[no-any-return]


def sac_replay_behaviour(make_contexts: Callable[[], tuple[Any, Any]] = sac_contexts) -> ReplayBehaviour:
    """Does selective activation checkpointing replay strictly?

    Records nothing under SAC, then runs one ``aten.empty`` under SAC's replay mode. Strict replay
    (torch 2.13+, pytorch PR #176455) raises ``... not found in storage``; lenient replay (2.10-2.12)
    re-executes the op, which a plain mode below it sees. Anything else raises :class:`PatchRefused`
    (unknown behaviour), as does the inconclusive case where the op never reaches Python dispatch.
    ``make_contexts`` lets a fix check the modes it relies on while building them.
    """
    import torch

    def body() -> ReplayBehaviour:
        record, replay = make_contexts()
        below = counting_mode()
        with record:
            pass
        with below:
            try:
                with replay:
                    torch.empty(1, device="cpu")
            except RuntimeError as exc:
                if _STRICT_MARK in str(exc):
                    first = str(exc).split(". ")[0]
                    return ReplayBehaviour(
                        True, f"SAC replay is strict: an op the forward never recorded raised ({first})"
                    )
                raise PatchRefused(f"SAC replay raised an unexpected error for an unrecorded op: {exc}") from None
        # torch 2.12's replay mode runs ops of its own (arange, nonzero, ...) that the mode below also
        # sees: only the probe's own op re-executed shows lenient replay
        if _PROBE_OP in below.seen:
            return ReplayBehaviour(
                False, f"SAC replay is lenient: an op the forward never recorded was re-executed ({_PROBE_OP})"
            )
        raise PatchRefused(
            f"strict-replay probe inconclusive: the probe's op ({_PROBE_OP}) never reached Python dispatch"
            f" below SAC's replay mode (seen there: {sorted(set(below.seen)) or 'nothing'})"
        )

    return isolated(body)  # type: ignore[no-any-return]
