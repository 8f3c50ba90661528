"""Without TransformerEngine (the default test environment) the fix is not-installed and costs nothing,
and the declared reproductions say that they cannot run (never that they broke)."""

from __future__ import annotations

import pytest
from _fp8_helpers import TE_INSTALLED
from torchfix_core.testing import assert_inert_without, reproduce


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
def test_fix_is_not_installed_and_inert_without_transformer_engine() -> None:
    assert_inert_without("fp8-recompute", "transformer_engine")


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
def test_pairing_fix_is_not_installed_and_inert_without_transformer_engine() -> None:
    assert_inert_without("fp8-recompute-pairing", "transformer_engine")


@pytest.mark.skipif(TE_INSTALLED, reason="TransformerEngine is installed in this environment")
@pytest.mark.parametrize("fix_id", ["fp8-recompute", "fp8-recompute-pairing"])
def test_declared_reproduction_cannot_run_without_transformer_engine(fix_id: str) -> None:
    r = reproduce(fix_id, False)
    assert r["outcome"]["result"] == "cannot-run", r
    assert r["outcome"]["detail"].startswith("TransformerEngine does not import here (ModuleNotFoundError"), r
