"""torchfix contract for magi-aot-fallback (needs magi_compiler: ``nox -s magi``)."""

from __future__ import annotations

import importlib.util

import pytest
from torchfix_core.testing import FixContract, assert_version_does_not_decide

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("magi_compiler") is None, reason="magi_compiler is not installed (nox -s magi)"
)


class TestMagiContract(FixContract):
    fix_id = "magi-aot-fallback"
    patched = [("magi_compiler._api", "_run_orchestration")]
    expected_state = "applied"  # Magi 8e2e47c: no fallback of its own (and an AOT path that fails on torch 2.10-2.13)


@pytest.mark.parametrize("version", ["0.0.0", "1.0.0", "7.3.0"])
def test_magi_version_does_not_decide_the_probe_does(version: str) -> None:
    """Every Magi commit builds as 1.0.0 (versioningit's default), or 0.0.0 without versioningit:
    whatever Magi reports, the probe on its live layout decides."""
    assert_version_does_not_decide("magi-aot-fallback", "magi_compiler", version, TestMagiContract.expected_state)
