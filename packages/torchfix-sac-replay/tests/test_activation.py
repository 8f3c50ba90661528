"""Activation stays cheap: nothing of this fix imports torch._dynamo until the user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys
import torch, torchfix_core
before = "torch._dynamo" in sys.modules
row = next(r for r in torchfix_core.status() if r.id == "sac-replay")
import torchfix_sac_replay, torchfix_sac_replay.package, torchfix_sac_replay.explain
light = "torch._dynamo" in sys.modules
import torch._dynamo
after = next(r for r in torchfix_core.status() if r.id == "sac-replay")
print(json.dumps({"before": before, "state": row.state, "light": light, "after": after.state, "reason": after.reason}))
"""


def test_activation_at_import_torch_does_not_import_dynamo() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update(TORCHFIX_DISABLE="all", TORCHFIX_SAC_REPLAY_ENABLED="1")
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["before"] is False, "import torch + torchfix activation imported torch._dynamo"
    assert got["state"] == "pending"
    assert got["light"] is False, "the package's data/explain modules imported torch._dynamo"
    assert got["after"] in (("applied", "not-needed") if in_validated_range() else ("out-of-range",)), got


def in_validated_range() -> bool:
    from torchfix_core.testing import outside_validated_range

    return outside_validated_range("sac-replay") is None
