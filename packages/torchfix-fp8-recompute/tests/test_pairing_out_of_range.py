"""fp8-recompute-pairing outside its validated range (e.g. TE <= 2.17, or a torch outside it): the
fix reports ``out-of-range`` and patches nothing. Inside the range ``test_pairing_recompute.py`` runs
instead."""

from __future__ import annotations

import pytest
from _fp8_helpers import TE_INSTALLED, pairing_out_of_range, requires_te

OUT_OF_RANGE = pairing_out_of_range() if TE_INSTALLED else ""
pytestmark = [requires_te]


@pytest.mark.skipif(not OUT_OF_RANGE, reason="inside the validated range")
def test_out_of_range_te_is_left_alone() -> None:
    """Outside the validated range (e.g. TE <= 2.17) the fix is out-of-range and patches nothing."""
    import subprocess
    import sys

    code = (
        "import torch, torchfix_core, transformer_engine.pytorch;"
        "print(next(r.state for r in torchfix_core.status() if r.id == 'fp8-recompute-pairing'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "out-of-range"
