"""Without MagiCompiler (the default test environment) magi-aot-fallback is not-installed and inert."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

CHECK = """
import json, sys
import torch
import torchfix_core
row = next(r for r in torchfix_core.status() if r.id == "magi-aot-fallback")
print(json.dumps({"state": row.state, "reason": row.reason, "impl_loaded": "torchfix_aot_fallback.magi" in sys.modules}))
"""


@pytest.mark.skipif(importlib.util.find_spec("magi_compiler") is not None, reason="magi_compiler is installed")
def test_magi_fix_is_not_installed_and_inert_without_magi() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    proc = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row == {"state": "not-installed", "reason": "magi_compiler is not installed", "impl_loaded": False}, row
