"""The declared reproduction (``FixSpec.reproduction``, what ``torchfix-doctor verify`` runs) where it
cannot run: without a CUDA GPU it says so (``cannot-run``, never that it broke). Its runs on a GPU,
without and with the fix, are in ``test_gpu.py``."""

from __future__ import annotations

import pytest
import torch
from torchfix_core.testing import reproduce

FIX = "fp8-minmax-store"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU: test_gpu.py runs the reproduction")
def test_declared_reproduction_cannot_run_without_a_gpu() -> None:
    r = reproduce(FIX, False)
    assert r["outcome"] == {
        "result": "cannot-run",
        "measure": "",
        "detail": "needs a CUDA GPU: the miscompile is in Triton's code for NVIDIA GPUs",
    }, r
    assert r["state"] == "disabled", r
