"""Helpers of the redis-cache-errors tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.reproduction import RedisServer
from torchfix_core.testing import only_fix, run_json_script

FIX = "redis-cache-errors"
MODULE = "torch._inductor.remote_cache"
SCENARIOS = Path(__file__).with_name("_scenarios.py")

#: every test that starts a server needs the binary and the client; without them they skip and say so
needs_server = [
    pytest.mark.skipif(
        not RedisServer.available(), reason="no redis-server binary: install the Debian package redis-server"
    ),
]


def redis_client_installed() -> bool:
    try:
        import redis  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def run(name: str, *args: str, on: bool) -> dict[str, Any]:
    """Scenario ``name`` of ``_scenarios.py`` in a fresh interpreter, only this fix on or off; once per
    arguments in a test session (the red runs serve the reproduction and the signature tests alike:
    each scenario starts its own server and is deterministic). Callers must not modify the result."""
    return run_json_script([SCENARIOS, name, *args], env=only_fix(FIX, on), timeout=600)
