"""Session fixtures of the fsdp-offload-hook tests: the CPU ``flip`` runs, each made once and shared
by ``test_fsdp_offload_hook.py`` and ``test_signatures.py`` (they are the expensive CPU runs)."""

from __future__ import annotations

from typing import Any

import pytest
from _util import FIX, assert_ok, run, upstream_fixed


@pytest.fixture(scope="session")
def bug_present() -> bool:
    """Whether this torch's own ``foreach_reduce`` lacks upstream's guard (torchfix off)."""
    return not upstream_fixed()


@pytest.fixture(scope="session")
def flip_without() -> dict[str, Any]:
    """``_scenarios.py flip`` with the fix disabled (torch's own code)."""
    r = run("flip", fix=False)
    assert_ok(r)
    return r


@pytest.fixture(scope="session")
def flip_with() -> dict[str, Any]:
    """``_scenarios.py flip`` with the fix on; where torch carries upstream's fix, forced past the
    range check (``TORCHFIX_FORCE``) so that the probe decides (``not-needed``)."""
    r = run("flip", fix=True, env={} if not upstream_fixed() else {"TORCHFIX_FORCE": FIX})
    assert_ok(r)
    return r
