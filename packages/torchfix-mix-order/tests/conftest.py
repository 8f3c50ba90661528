"""Session fixtures of the mix-order-view-write tests: the CPU ``emit`` runs, made once and shared by
``test_codegen.py`` and ``test_signatures.py``."""

from __future__ import annotations

from typing import Any

import pytest
from _util import FIX, assert_ok, bug_codegen, refused_layout, run, torch_codegen
from torchfix_core.testing import outside_validated_range
from torchfix_core.testing.fixtures import with_and_without_fix


@pytest.fixture(scope="session")
def bug_present() -> bool:
    """Whether this torch's own mix-order reduction rebinds view outputs (torchfix off), with Triton.
    Where it does in a layout the fix refuses (2.10.0, out of its range), every test that needs the fix
    applied is skipped: ``test_contract.py`` checks the refusal instead."""
    if refused_layout():
        pytest.skip("the bug is here in a layout the fix refuses (out of its range): see test_contract.py")
    return bug_codegen()


def _emit(fix: bool) -> dict[str, Any]:
    """``_scenarios.py emit`` with the fix on or disabled; with it on outside its validated range,
    forced past the range check (``TORCHFIX_FORCE``) so that the probe decides."""
    if not torch_codegen()["mix_order"]:
        pytest.skip("this torch has no mix-order reduction (before 2.10): nothing is emitted")
    if refused_layout():
        pytest.skip("the bug is here in a layout the fix refuses (out of its range): see test_contract.py")
    forced = {"TORCHFIX_FORCE": FIX} if fix and outside_validated_range(FIX) else {}
    r = run("emit", fix=fix, env=forced)
    assert_ok(r)
    return r


#: ``emit_with`` / ``emit_without``: the two ``emit`` runs, each made once a session
emit_with, emit_without = with_and_without_fix(_emit, scope="session")
