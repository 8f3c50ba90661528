"""GPU: real ``te.Linear`` FP8 delayed scaling under ``te.checkpoint`` with an inner autocast.

Runs ``gpu/check_te_fp8.py`` (each case in its own subprocess). Needs an FP8-capable GPU (sm89+),
TransformerEngine with its compiled torch extension, torchfix-core and this package.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _fp8_helpers import TE_INSTALLED

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parent.parent / "gpu" / "check_te_fp8.py"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(not TE_INSTALLED, reason="needs TransformerEngine"),
]


def test_te_linear_inner_autocast_checkpoint_passes_with_fix_on_gpu() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=1800)
    print(proc.stdout)
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for row in rows:
        if row["fix"]:
            assert row["error"] is None and row["finite"], row
        elif row.get("fix_state") == "disabled" and row["error"] is not None:
            assert "global_fp8_buffer_pos_fwd_recompute" in row["error"], row
