"""Without MagiCompiler (the default test environment) magi-cache-key is not-installed and inert."""

from __future__ import annotations

import importlib.util

import pytest
from torchfix_core.testing import status_without_library


@pytest.mark.skipif(importlib.util.find_spec("magi_compiler") is not None, reason="magi_compiler is installed")
def test_magi_cache_key_is_not_installed_and_inert_without_magi() -> None:
    row = status_without_library("magi-cache-key", "magi_compiler")
    assert row == {
        "state": "not-installed",
        "reason": "magi_compiler is not installed",
        "implementation_loaded": False,
        "library_loaded": False,
    }, row
