"""Without TransformerEngine (the default test environment) the fix is not-installed and costs nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _fp8_helpers import TE_INSTALLED

CHECK = """
import json, sys
import torch
import torchfix_core
row = next(r for r in torchfix_core.status() if r.id == "fp8-recompute")
print(json.dumps({"state": row.state, "reason": row.reason,
                  "patch_loaded": "torchfix_fp8_recompute.patch" in sys.modules,
                  "te_loaded": any(m.startswith("transformer_engine") for m in sys.modules)}))
"""


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
def test_fix_is_not_installed_and_inert_without_transformer_engine() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    proc = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["state"] == "not-installed", row
    assert "transformer_engine is not installed" in row["reason"], row
    assert not row["patch_loaded"], "the implementation module was imported although TE is absent"
    assert not row["te_loaded"]
