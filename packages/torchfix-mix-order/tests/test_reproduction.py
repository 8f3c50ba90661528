"""The declared reproduction (``FixSpec.reproduction``, what ``torchfix-doctor verify`` runs) where it
cannot run: without a CUDA GPU it says so (``cannot-run``, never that it broke). Its runs on a GPU,
without and with the fix, are in ``test_gpu.py``; its case runs on a CPU here as a dry run (no
mix-order reduction on a CPU, so every chunk is written)."""

from __future__ import annotations

import pytest
import torch
from torchfix_core.testing import reproduce
from torchfix_mix_order import reproduction

FIX = "mix-order-view-write"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU: test_gpu.py runs the reproduction")
def test_declared_reproduction_cannot_run_without_a_gpu() -> None:
    r = reproduce(FIX, False)
    assert r["outcome"] == {
        "result": "cannot-run",
        "measure": "",
        "detail": "needs a CUDA GPU: mix-order reduction is a fusion of Inductor's Triton backend",
    }, r
    assert r["state"] == "disabled", r


def test_case_dry_run_on_cpu_measures_every_chunk() -> None:
    r = reproduction.case(seq=128, dim=32, steps=2, device="cpu")
    assert len(r["errors"]) == 2 and all(len(step) == reproduction.CHUNKS for step in r["errors"]), r
    assert r["wrong"] == [] and r["nonfinite"] == [] and r["stale"] == [], r
    assert max(max(step) for step in r["errors"]) < r["limit"], r


def test_worst_is_nan_aware() -> None:
    nan = float("nan")
    assert reproduction.worst([1.0, 430.0]) == 430.0
    assert reproduction.worst([430.0, nan]) != reproduction.worst([430.0, nan])  # NaN, in either order
    assert reproduction.worst([nan, 430.0]) != reproduction.worst([nan, 430.0])
