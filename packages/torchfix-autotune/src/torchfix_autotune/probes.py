"""Feature probes on the live torch objects (never the version string).

* :func:`sac_replay_behaviour`: does selective activation checkpointing replay strictly (torch
  2.13+, https://github.com/pytorch/pytorch/pull/176455: any op not recorded in the forward raises
  during recompute) or leniently (2.8-2.12: an unrecorded op is simply re-executed)? The shared
  probe of :func:`probe_replay_behaviour`; where strict, SAC's modes are checked to declare
  ``ignore_compile_internals()``.
* :func:`check_patch_points`: are ``CachingAutotuner.bench`` / ``.autotune_to_one_config`` /
  ``.coordinate_descent_tuning`` plain functions defined on the class with the parameters the fix
  was written for, and do the dispatch-mode-stack primitives the filter needs exist?
* :func:`check_filter`: does :func:`torchfix_autotune.modes.without_compile_internal_modes` hide the
  real SAC replay mode, keep a normal mode, and restore the stack, on this torch?

Side effects: none that outlive a call. The SAC probes run inside
``torch.utils._python_dispatch._disable_current_modes()`` and ``torch._C.DisableTorchFunction()``,
so an outer mode (a user's SAC forward, FakeTensorMode during a compile that imported
``triton_heuristics``, a logging ``TorchFunctionMode``) never sees the probe's op; the probe's own
modes are entered and exited with ``with``; the one tensor allocated is a 1-element CPU tensor,
freed on return. Only the calling thread's (thread-local) mode stacks are touched.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from torchfix_core import PatchRefused
from torchfix_core.patching import check_signature, read_raw
from torchfix_core.probes import counting_mode, isolated

_STRICT_MARK = "not found in storage"
#: the op the strict-replay probe runs under SAC replay without recording it (``torch.empty(1)``)
_PROBE_OP = "aten.empty.memory_format"

#: The three methods wrapped, with the parameter names the fix was written against
#: (identical in torch 2.10.0, 2.11.0, 2.12.0, 2.13.0, 2.14.1, 2.15.0).
PATCH_POINTS: dict[str, tuple[str, ...]] = {
    "bench": ("self", "launcher", "args", "with_profiler", "kwargs"),
    "autotune_to_one_config": ("self", "args", "kwargs"),
    "coordinate_descent_tuning": ("self", "launcher", "args", "kwargs"),
}

TRIGGER = "torch._inductor.runtime.triton_heuristics"


class ReplayBehaviour(NamedTuple):
    """Result of :func:`sac_replay_behaviour`."""

    strict: bool
    detail: str


def sac_contexts() -> tuple[Any, Any]:
    """SAC's (recording, replay) context pair for a policy saving ``aten.mm``."""
    import torch

    try:
        from torch.utils.checkpoint import create_selective_checkpoint_contexts
    except ImportError:
        raise PatchRefused("torch.utils.checkpoint.create_selective_checkpoint_contexts does not exist") from None
    return create_selective_checkpoint_contexts([torch.ops.aten.mm.default])  # type: ignore[no-any-return]


def probe_replay_behaviour(make_contexts: Callable[[], tuple[Any, Any]] = sac_contexts) -> ReplayBehaviour:
    """Does selective activation checkpointing replay strictly?

    Records nothing under SAC, then runs one ``aten.empty`` under SAC's replay mode. Strict replay
    (torch 2.13+, pytorch PR #176455) raises ``... not found in storage``; lenient replay (2.8-2.12)
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


def _sac_contexts() -> tuple[Any, Any]:
    """SAC's context pair, refused unless both modes declare ``ignore_compile_internals()`` (what
    the filter keys on)."""
    record, replay = sac_contexts()
    for name, mode in (("recording", record), ("replay", replay)):
        ignore = getattr(mode, "ignore_compile_internals", None)
        if ignore is None or not callable(ignore):
            raise PatchRefused(f"SAC's {name} context {type(mode).__name__} has no ignore_compile_internals()")
        if ignore() is not True:
            raise PatchRefused(
                f"SAC's {name} mode {type(mode).__name__} no longer declares ignore_compile_internals(); "
                "the mode filter would not hide it"
            )
    return record, replay


def sac_replay_behaviour() -> ReplayBehaviour:
    """Strict or lenient SAC replay (:func:`probe_replay_behaviour`). Where replay is strict, SAC's
    modes are also checked to declare ``ignore_compile_internals()`` (what the filter keys on;
    :class:`PatchRefused` otherwise). Where it is lenient the declaration does not matter: an op the
    forward never recorded is re-executed whichever modes see the autotuner, so the bug cannot occur
    (torch 2.8/2.9, whose SAC modes declare nothing, and 2.10-2.12)."""
    replay = probe_replay_behaviour(sac_contexts)
    if replay.strict:
        _sac_contexts()
    return replay


def check_primitives() -> None:
    """Raise :class:`PatchRefused` unless the mode-stack primitives the filter uses exist."""
    import torch
    import torch.utils._python_dispatch as pd

    for owner, name, where in (
        (torch._C, "_len_torch_dispatch_stack", "torch._C"),
        (torch._C, "_get_dispatch_stack_at", "torch._C"),
        (pd, "_pop_mode", "torch.utils._python_dispatch"),
        (pd, "_push_mode", "torch.utils._python_dispatch"),
    ):
        if not callable(getattr(owner, name, None)):
            raise PatchRefused(f"{where}.{name} does not exist")
    if not callable(getattr(pd.TorchDispatchMode, "ignore_compile_internals", None)):
        raise PatchRefused("TorchDispatchMode.ignore_compile_internals does not exist")


def check_patch_points() -> type:
    """Return ``CachingAutotuner`` after checking the three methods; raise :class:`PatchRefused` otherwise."""
    import importlib

    module = importlib.import_module(TRIGGER)
    cls = getattr(module, "CachingAutotuner", None)
    if not isinstance(cls, type):
        raise PatchRefused(f"{TRIGGER}.CachingAutotuner does not exist")
    for name, params in PATCH_POINTS.items():
        raw = read_raw(cls, name)
        check_signature(raw, params, f"CachingAutotuner.{name}")
    return cls


def check_filter() -> str:
    """Check the mode filter on the live SAC replay mode; return a one-line description."""
    import torch

    from torchfix_autotune.modes import current_stack, without_compile_internal_modes

    def body() -> str:
        _, replay = _sac_contexts()
        below = counting_mode()
        with below, replay:
            before = current_stack()
            with without_compile_internal_modes() as hidden:
                inside = current_stack()
                torch.empty(1, device="cpu")  # would raise under strict replay if the filter failed
            after = current_stack()
        if [type(m) for m in hidden] != [type(replay)] or inside != [below]:
            raise PatchRefused(f"mode filter self-check failed: hid {hidden!r}, left {inside!r}")
        if after != before:
            raise PatchRefused("mode filter self-check failed: the stack was not restored")
        return f"the filter hides {type(replay).__name__} and keeps other modes"

    return isolated(body)  # type: ignore[no-any-return]
