"""The shared torch probes, on the installed (real) torch."""

from __future__ import annotations

import torch
from torchfix_core.probes import counting_mode, sac_replay_behaviour


def test_sac_replay_behaviour_reports_strict_replay_with_the_failing_op() -> None:
    # torch 2.13 (the default test torch) replays strictly; the detail names the unrecorded op
    result = sac_replay_behaviour()
    assert result.strict is True
    assert "aten.empty.memory_format" in result.detail


def test_probe_ops_never_reach_an_outer_mode_of_the_caller() -> None:
    # e.g. the probe running inside a user's SAC forward: the user's modes must not see its op
    outer = counting_mode()
    with outer:
        torch.ones(1)
        sac_replay_behaviour()
        torch.ones(1)
    assert len(outer.seen) == 2 and not any("empty" in op for op in outer.seen), outer.seen
