"""Without TransformerEngine (the default test environment) the fix is not-installed and costs nothing."""

from __future__ import annotations

import pytest
from _fp8_helpers import TE_INSTALLED
from torchfix_core.testing import status_without_library


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
def test_fix_is_not_installed_and_inert_without_transformer_engine() -> None:
    row = status_without_library("fp8-recompute", "transformer_engine")
    assert row["state"] == "not-installed", row
    assert "transformer_engine is not installed" in row["reason"], row
    assert not row["implementation_loaded"], "the implementation module was imported although TE is absent"
    assert not row["library_loaded"]
