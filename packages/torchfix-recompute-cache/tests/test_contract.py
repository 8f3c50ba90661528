"""torchfix-core's contract (import orders, idempotency, revert, env switches) for recompute-cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from torchfix_core.testing import FixContract

SCENARIOS = Path(__file__).resolve().parent / "_scenarios.py"


def _lru_reorders_by_default() -> bool:
    """The bug's precondition, observed with the fix disabled: Dynamo moves a hit entry to the front."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update(TORCHFIX_DISABLE="recompute-cache")
    proc = subprocess.run(
        [sys.executable, str(SCENARIOS), "no_checkpoint"], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return bool(json.loads(proc.stdout.strip().splitlines()[-1])["reorders"])


class TestContract(FixContract):
    fix_id = "recompute-cache"
    patched = [
        ("torch.utils.checkpoint", "_checkpoint_hook.__init__"),
        ("torch", "_C._dynamo.eval_frame._set_lru_cache"),
    ]
    expected_state = "applied" if _lru_reorders_by_default() else "not-needed"
