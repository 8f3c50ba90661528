"""torchfix contract for magi-aot-fallback (needs magi_compiler: ``nox -s magi``)."""

from __future__ import annotations

import importlib.util

import pytest
from torchfix_core.testing import FixContract

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("magi_compiler") is None, reason="magi_compiler is not installed (nox -s magi)"
)


class TestMagiContract(FixContract):
    fix_id = "magi-aot-fallback"
    patched = [("magi_compiler._api", "_run_orchestration")]
    expected_state = "applied"  # Magi 8e2e47c: no fallback of its own (and an AOT path that fails on torch 2.10-2.13)
