"""torchfix-core's contract (import orders, idempotency, revert, env switches) for redis-cache-errors.
The bug exists on every release of the validated range (torch 2.8-2.15: no upstream fix), so the
probe decides ``applied`` wherever the redis client is installed (conftest.py skips without it)."""

from __future__ import annotations

from _util import FIX, MODULE
from torchfix_core.testing import FixContract


class TestContract(FixContract):
    fix_id = FIX
    patched = [
        (MODULE, "RedisRemoteCacheBackend._put"),
        (MODULE, "RedisRemoteCacheBackend._get"),
    ]
    expected_state = "applied"
