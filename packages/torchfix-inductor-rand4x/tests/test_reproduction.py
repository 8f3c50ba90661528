"""The declared reproduction (``FixSpec.reproduction``, what ``torchfix-doctor verify`` runs) where it
cannot run: without a CUDA GPU it says so (``cannot-run``, never that it broke). And its judgement on
synthetic masks and results: a mask repeating in groups of four is recognised, a part that did not
compile is named in the measure (the round-4 prototype's ``Node permute_1 was invalid`` on torch
2.11), and a run where neither part shows anything and the checkpointed one did not run is broken,
not clean. Its runs on a GPU, without and with the fix, are in ``test_gpu.py``."""

from __future__ import annotations

import pytest
import torch
from torchfix_core.testing import reproduce

FIX = "inductor-rand4x-dropout"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU: test_gpu.py runs the reproduction")
def test_declared_reproduction_cannot_run_without_a_gpu() -> None:
    r = reproduce(FIX, False)
    assert r["outcome"] == {
        "result": "cannot-run",
        "measure": "",
        "detail": "needs a CUDA GPU: the 4x random path is in Inductor's CUDA Triton kernels",
    }, r
    assert r["state"] == "disabled", r


# -- the measure's judgement, on synthetic masks and results (no GPU, no compile) ----------------------


def test_mask_repeating_in_groups_of_four_is_recognised() -> None:
    from torchfix_inductor_rand4x.reproduction import mask_stats, repeats_in_fours

    torch.manual_seed(0)
    independent = torch.rand(8, 256, 64) < 0.5
    repeated = (torch.rand(8, 256, 16) < 0.5).repeat_interleave(4, dim=-1)
    clean, bad = mask_stats(independent), mask_stats(repeated)
    assert not repeats_in_fours(clean), clean
    assert repeats_in_fours(bad) and bad["agree_within4"] == 1.0, bad
    assert abs(clean["keep_rate"] - 0.5) < 0.01, clean


def _result(differ: float, within: float, *, b_error: str = "") -> dict[str, object]:
    mask = {"keep_rate": 0.5, "keep_z": 0.0, "agree_within4": within, "agree_across4": 0.5}
    code = {"rand4x": 1 if within > 0.9 else 0, "tl_rand": 2}
    b: dict[str, object] = (
        {"error": b_error}
        if b_error
        else {
            "forward_mask": mask,
            "backward_mask": mask,
            "mask_differ_fraction": differ,
            "elements": 2097152,
            "max_grad_error": 2.0 if differ else 0.0,
            "code": code,
        }
    )
    return {"torch": "t", "triton": "3", "device": "gpu", "a": {"mask": mask, "code": code}, "b": b}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (_result(0.0, 0.5), "not-observed"),
        (_result(0.375, 0.5), "observed"),
        (_result(0.0, 1.0), "observed"),
        (_result(0.0, 1.0, b_error="AssertionError: Node permute_1 was invalid, but is output"), "observed"),
    ],
)
def test_outcome_judges_the_measure(monkeypatch: pytest.MonkeyPatch, result: dict[str, object], expected: str) -> None:
    from torchfix_inductor_rand4x import reproduction

    monkeypatch.setattr(reproduction, "_cannot_run_why", lambda: "")
    monkeypatch.setattr(reproduction, "measure", lambda: result)
    outcome = reproduction.rand4x_dropout()
    assert outcome.result == expected, outcome
    if "error" in result["b"]:  # type: ignore[operator]
        assert "part B did not run: AssertionError: Node permute_1" in outcome.measure, outcome


def test_outcome_breaks_where_the_checkpointed_part_did_not_run_and_the_forward_is_clean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchfix_inductor_rand4x import reproduction

    monkeypatch.setattr(reproduction, "_cannot_run_why", lambda: "")
    monkeypatch.setattr(reproduction, "measure", lambda: _result(0.0, 0.5, b_error="RuntimeError: x"))
    with pytest.raises(RuntimeError, match="did not run"):
        reproduction.rand4x_dropout()
