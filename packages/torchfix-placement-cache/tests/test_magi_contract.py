"""torchfix contract for magi-cache-key (needs magi_compiler: ``nox -s magi``)."""

from __future__ import annotations

import importlib.util

import pytest
from torchfix_core.testing import FixContract

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("magi_compiler") is None, reason="magi_compiler is not installed (nox -s magi)"
)
BACKEND = "magi_compiler.magi_backend.magi_backend"
STATE = ("magi_compiler.magi_backend.magi_compiler_base", "MagiCompileState.aot_compilation_path")


class TestMagiContract(FixContract):
    fix_id = "magi-cache-key"
    patched = [(BACKEND, "MagiBackend.__call__"), (BACKEND, "MagiBackend._init_cache"), STATE]
    expected_state = "applied"  # Magi 8e2e47c: no input term in either key
