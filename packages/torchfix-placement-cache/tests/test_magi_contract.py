"""torchfix contract for magi-cache-key (needs magi_compiler: ``nox -s magi``)."""

from __future__ import annotations

import importlib.util

import pytest
from torchfix_core.testing import FixContract, assert_version_does_not_decide

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("magi_compiler") is None, reason="magi_compiler is not installed (nox -s magi)"
)
BACKEND = "magi_compiler.magi_backend.magi_backend"
STATE = ("magi_compiler.magi_backend.magi_compiler_base", "MagiCompileState.aot_compilation_path")


class TestMagiContract(FixContract):
    fix_id = "magi-cache-key"
    patched = [(BACKEND, "MagiBackend.__call__"), (BACKEND, "MagiBackend._init_cache"), STATE]
    expected_state = "applied"  # Magi 8e2e47c: no input term in either key


@pytest.mark.parametrize("version", ["0.0.0", "1.0.0", "7.3.0"])
def test_magi_version_does_not_decide_the_probe_does(version: str) -> None:
    """Every Magi commit builds as 1.0.0 (versioningit's default), or 0.0.0 without versioningit:
    whatever Magi reports, the probe on its live layout decides."""
    assert_version_does_not_decide("magi-cache-key", "magi_compiler", version, TestMagiContract.expected_state)
