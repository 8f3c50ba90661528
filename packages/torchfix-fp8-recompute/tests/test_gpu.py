"""GPU: real ``te.Linear`` FP8 delayed scaling under ``te.checkpoint`` with an inner autocast, and the
fixes' declared reproductions on the GPU with real TransformerEngine.

Runs ``gpu/check_te_fp8.py`` (each case in its own subprocess), then each declared reproduction
(``torchfix_fp8_recompute.reproduction``) without and with its fix as ``torchfix-doctor verify``
runs it. Needs an FP8-capable GPU (sm89+), TransformerEngine with its compiled torch extension,
torchfix-core and this package.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _fp8_helpers import TE_INSTALLED
from torchfix_core.testing import reproduce

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


# -- the declared reproductions (FixSpec.reproduction: what torchfix-doctor verify runs) -----------------


@pytest.mark.parametrize("fix_id", ["fp8-recompute", "fp8-recompute-pairing"])
def test_declared_reproduction_on_gpu(fix_id: str) -> None:
    """The spec's reproduction on the GPU (every other fix off): the bug without the fix where this TE
    release has it (the fix ``applied``), not with it; neither run shows it where TE carries the
    upstream fix (``not-needed``)."""
    from _te_gpu import expected_fix_state
    from transformer_engine import __version__ as te_version

    expected = expected_fix_state(fix_id, te_version, "")
    if expected == "out-of-range":
        pytest.skip(f"TE {te_version} is outside {fix_id}'s validated range")
    off, on = reproduce(fix_id, False), reproduce(fix_id, True)
    print(f"\n{fix_id} declared reproduction, fix off: {json.dumps(off)}\nfix on: {json.dumps(on)}")
    if off["outcome"]["result"] == "cannot-run":
        pytest.skip(off["outcome"]["detail"])
    assert on["state"] == expected and on["outcome"]["result"] == "not-observed", on
    assert off["outcome"]["result"] == ("observed" if expected == "applied" else "not-observed"), off
