"""The strict-replay probe (torchfix_autotune.probes.probe_replay_behaviour), on the installed (real) torch."""

from __future__ import annotations

import torch
from torchfix_autotune.probes import probe_replay_behaviour as sac_replay_behaviour
from torchfix_core.probes import counting_mode

# Measured on the releases of the test matrix: 2.10-2.12 re-execute unrecorded ops, 2.13-2.15 raise.
STRICT_REPLAY = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)


def test_sac_replay_behaviour_reports_replay_kind_with_the_unrecorded_op() -> None:
    # the detail names the op the forward never recorded, either way
    result = sac_replay_behaviour()
    assert result.strict is STRICT_REPLAY, result.detail
    assert "aten.empty.memory_format" in result.detail


def test_probe_ops_never_reach_an_outer_mode_of_the_caller() -> None:
    # e.g. the probe running inside a user's SAC forward: the user's modes must not see its op
    outer = counting_mode()
    with outer:
        torch.ones(1)
        sac_replay_behaviour()
        torch.ones(1)
    assert len(outer.seen) == 2 and not any("empty" in op for op in outer.seen), outer.seen


def test_other_ops_below_replay_without_the_probe_op_are_inconclusive() -> None:
    """A replay mode that runs ops of its own (as torch 2.12's does: arange, nonzero, ...) but never
    lets the probe's op through is not evidence of lenient replay: the probe refuses."""
    import contextlib

    import pytest
    from torch.utils._python_dispatch import TorchDispatchMode
    from torchfix_core.patching import PatchRefused

    made_earlier = torch.zeros(1)

    class BusyButSwallowing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            torch.arange(3)  # reaches the mode below
            return made_earlier  # the requested op itself is never run below

    with pytest.raises(PatchRefused, match=r"inconclusive.*aten\.empty\.memory_format.*aten\.arange"):
        sac_replay_behaviour(lambda: (contextlib.nullcontext(), BusyButSwallowing()))
