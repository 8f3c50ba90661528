"""Session fixtures of the fp8-minmax-store tests: the CPU ``codegen`` runs, made once and shared by
``test_codegen.py`` and ``test_signatures.py``."""

from __future__ import annotations

from typing import Any

import pytest
from _util import FIX, assert_ok, bug_codegen, run
from torchfix_core.testing import outside_validated_range


@pytest.fixture(scope="session")
def bug_present() -> bool:
    """Whether this torch's own Triton codegen emits the ``PropagateNan`` min/max (torchfix off)."""
    return bug_codegen()


@pytest.fixture(scope="session")
def codegen_without() -> dict[str, Any]:
    """``_scenarios.py codegen`` with the fix disabled (torch's own codegen)."""
    r = run("codegen", fix=False)
    assert_ok(r)
    return r


@pytest.fixture(scope="session")
def codegen_with() -> dict[str, Any]:
    """``_scenarios.py codegen`` with the fix on; outside its validated range, forced past the range
    check (``TORCHFIX_FORCE``) so that the probe decides."""
    r = run("codegen", fix=True, env={"TORCHFIX_FORCE": FIX} if outside_validated_range(FIX) else {})
    assert_ok(r)
    return r
