"""Without MagiCompiler (the default test environment) magi-aot-fallback is not-installed and inert."""

from __future__ import annotations

import importlib.util

import pytest
from torchfix_core.testing import assert_inert_without


@pytest.mark.skipif(importlib.util.find_spec("magi_compiler") is not None, reason="magi_compiler is installed")
def test_magi_aot_fallback_is_not_installed_and_inert_without_magi() -> None:
    assert_inert_without("magi-aot-fallback", "magi_compiler")
