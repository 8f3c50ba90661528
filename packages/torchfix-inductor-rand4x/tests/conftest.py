"""Session fixtures of the inductor-rand4x-dropout tests: the CPU ``codegen`` runs, made once and shared
by ``test_codegen.py`` and ``test_signatures.py``."""

from __future__ import annotations

from typing import Any

import pytest
from _util import FIX, assert_ok, bug_codegen, run
from torchfix_core.testing import outside_validated_range
from torchfix_core.testing.fixtures import with_and_without_fix


@pytest.fixture(scope="session")
def bug_present() -> bool:
    """Whether this torch's own codegen draws with ``rand4x`` in a 1-D CUDA Triton kernel (torchfix off),
    on a build with Triton."""
    return bug_codegen()


def _codegen(fix: bool) -> dict[str, Any]:
    """``_scenarios.py codegen`` with the fix on or disabled; with it on outside its validated range,
    forced past the range check (``TORCHFIX_FORCE``) so that the probe decides."""
    forced = {"TORCHFIX_FORCE": FIX} if fix and outside_validated_range(FIX) else {}
    r = run("codegen", fix=fix, env=forced)
    assert_ok(r)
    return r


#: ``codegen_with`` / ``codegen_without``: the two ``codegen`` runs, each made once a session
codegen_with, codegen_without = with_and_without_fix(_codegen, scope="session")
