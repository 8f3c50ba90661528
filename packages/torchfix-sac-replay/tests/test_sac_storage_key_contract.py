"""torchfix-core's contract (import orders, idempotency, revert, env switches) for sac-storage-key."""

from __future__ import annotations

from storage_key_scenarios import bug_present
from torchfix_core.testing import FixContract


class TestStorageKeyContract(FixContract):
    fix_id = "sac-storage-key"
    patched = [
        ("torch.utils.checkpoint", "_CachingTorchDispatchMode.__torch_dispatch__"),
        ("torch.utils.checkpoint", "_CachedTorchDispatchMode.__torch_dispatch__"),
    ]
    # the tests' own live check (a fresh interpreter without the fix), not the fix's probe
    expected_state = "applied" if bug_present() else "not-needed"


_AT_IMPORT_TORCH = r"""
import json, sys
import torch, torchfix_core
row = next(r for r in torchfix_core.status() if r.id == "sac-storage-key")
print(json.dumps({"state": str(row.state), "dynamo": "torch._dynamo" in sys.modules,
                  "implementation": "torchfix_sac_replay.storage_key" in sys.modules}))
"""


def test_import_torch_leaves_the_fix_pending_without_dynamo() -> None:
    """``import torch`` (which imports torch.utils.checkpoint) neither applies the fix nor imports
    torch._dynamo or the implementation module: the fix waits for its trigger, torch._dynamo."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update(TORCHFIX_DISABLE="all", TORCHFIX_SAC_STORAGE_KEY_ENABLED="1")
    proc = subprocess.run(
        [sys.executable, "-c", _AT_IMPORT_TORCH], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"state": "pending", "dynamo": False, "implementation": False}, got
