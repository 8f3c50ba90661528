"""Shared fixtures of the fp8-recompute tests.

``with_fix`` / ``without_fix``: the results of ``te_scenarios.py`` (TE PR #3284) with the fix and
without it, one subprocess each per session; ``test_pairing_recompute.py`` overrides the pair with
its own scenarios (TE PR #3394). ``mode``: each test that asks for it runs once per checkpoint mode.
``buggy_te`` / ``fixed_te`` skip a test by the ``bug_present`` fixture of the test's module (each
module tells in its own way whether the running TE lacks the upstream fix).
"""

from __future__ import annotations

import pytest
from _fp8_helpers import MODES, run_scenarios
from torchfix_core.testing.fixtures import with_and_without_fix

with_fix, without_fix = with_and_without_fix(run_scenarios, scope="session")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def buggy_te(bug_present: bool) -> None:
    """For the "fails without the fix" tests: skip on a TE that carries the upstream fix."""
    if not bug_present:
        pytest.skip("this TE carries the upstream fix; see test_upstream_fixed_te_is_left_alone")


@pytest.fixture
def fixed_te(bug_present: bool) -> None:
    """For the "upstream-fixed TE is left alone" tests: skip on a TE that has the bug."""
    if bug_present:
        pytest.skip("this TE has the bug")
