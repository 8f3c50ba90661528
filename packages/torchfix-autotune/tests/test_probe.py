"""The probe decides from the live objects, is side-effect free, and its reason reaches status/doctor."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchfix_core
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
from torchfix_autotune import probes
from torchfix_autotune.modes import current_stack
from torchfix_autotune.patch import AutotuneFix
from torchfix_core import PatchRefused
from torchfix_core.probes import counting_mode


def _replay_really_is_strict() -> bool:
    """Independent of the probe code: an unrecorded op under SAC replay, the plain way."""
    record, replay = create_selective_checkpoint_contexts([torch.ops.aten.mm.default])
    with record:
        pass
    try:
        with replay:
            torch.ones(2).sin()
    except RuntimeError as exc:
        return "not found in storage" in str(exc)
    return False


def test_probe_decision_matches_the_replay_behaviour_of_this_torch() -> None:
    result = AutotuneFix("autotune").probe()
    strict = _replay_really_is_strict()
    assert result.needed is strict
    assert ("SAC replay is strict" if strict else "SAC replay is lenient") in result.reason


def test_probe_ignores_the_version_string(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = AutotuneFix("autotune").probe().needed
    for fake in ("2.11.0", "2.13.0", "99.0.0"):
        monkeypatch.setattr(torch, "__version__", fake)
        assert AutotuneFix("autotune").probe().needed is expected


def test_status_shows_the_probe_reason() -> None:
    import torch._inductor.runtime.triton_heuristics  # noqa: F401 - the trigger
    from torchfix_core.testing import state_to_expect

    torchfix_core.apply(only=["autotune"])
    row = next(r for r in torchfix_core.status() if r.id == "autotune")
    assert row.state == state_to_expect("autotune", _replay_really_is_strict()), row
    if row.state == "out-of-range":  # torch 2.10: the range check answers before the probe
        assert "outside the validated range" in row.reason, row
    else:
        assert "SAC replay is" in row.reason


def test_probe_is_side_effect_free_under_an_outer_sac_forward() -> None:
    """The trigger can fire inside a user's SAC forward (first compile): the probe's op must not
    reach the user's modes or storage, and the stack must be unchanged."""

    def save_everything(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE

    outer_record, _ = create_selective_checkpoint_contexts(save_everything)
    log = counting_mode()  # a plain user mode recording every op it sees
    with log, outer_record:
        before = current_stack()
        AutotuneFix("autotune").probe()
        assert current_stack() == before
    assert log.seen == []
    assert len(outer_record.storage) == 0


def test_probe_is_side_effect_free_under_fake_tensor_mode() -> None:
    fake = FakeTensorMode()
    with fake:
        before = current_stack()
        result = AutotuneFix("autotune").probe()
        assert current_stack() == before
    assert result.needed is _replay_really_is_strict()


def test_probe_refuses_a_changed_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _replay_really_is_strict():
        pytest.skip("lenient replay: the probe answers not-needed before looking at the patch points")
    cls = probes.check_patch_points()

    def bench(self: Any, launcher: Any) -> float:  # another layout than the fix was written for
        return 0.0

    monkeypatch.setattr(cls, "bench", bench)
    with pytest.raises(PatchRefused, match="bench has parameters"):
        AutotuneFix("autotune").probe()


def test_probe_refuses_a_missing_patch_point(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _replay_really_is_strict():
        pytest.skip("lenient replay: the probe answers not-needed before looking at the patch points")
    cls = probes.check_patch_points()
    monkeypatch.delattr(cls, "coordinate_descent_tuning")
    with pytest.raises(PatchRefused, match="coordinate_descent_tuning"):
        AutotuneFix("autotune").probe()
