"""torchfix-core's contract (import orders, idempotency, revert, env switches) for sac-storage-key.

``import torch`` (which imports torch.utils.checkpoint) leaves the fix pending, imports neither
torch._dynamo nor the implementation module: the contract's ``activated_at_import_torch`` case."""

from __future__ import annotations

from conftest import storage_key_bug_present as bug_present
from torchfix_core.testing import FixContract

_SAC_MODES = ("_CachingTorchDispatchMode", "_CachedTorchDispatchMode")  # torch.utils.checkpoint's


class TestStorageKeyContract(FixContract):
    fix_id = "sac-storage-key"
    patched = [("torch.utils.checkpoint", f"{mode}.__torch_dispatch__") for mode in _SAC_MODES]
    # the tests' own live check (a fresh interpreter without the fix), not the fix's probe
    expected_state = "applied" if bug_present() else "not-needed"
