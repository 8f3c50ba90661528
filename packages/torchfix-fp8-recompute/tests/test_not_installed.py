"""Without TransformerEngine (the default test environment) the fix is not-installed and costs nothing."""

from __future__ import annotations

import pytest
from _fp8_helpers import TE_INSTALLED
from torchfix_core.testing import assert_inert_without


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
def test_fix_is_not_installed_and_inert_without_transformer_engine() -> None:
    assert_inert_without("fp8-recompute", "transformer_engine")


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
def test_pairing_fix_is_not_installed_and_inert_without_transformer_engine() -> None:
    assert_inert_without("fp8-recompute-pairing", "transformer_engine")
