"""The signatures of fp8-recompute and fp8-recompute-pairing match the errors their red runs raise,
and the report counts where each fix kept FP8 recompute state.

The red runs are the packages' own reproductions (``te_scenarios.py``, TE PR #3284;
``te_pairing_scenarios.py``, TE PR #3394) with the fix off, on TransformerEngine's real Python
code (the CPU environment of ``te_standins/make_env.py``: only TE's compiled extension and the
CUDA queries are stand-ins, the failing stash lookup is TE's own). Each result keeps the error's
real traceback, which ``torchfix-doctor explain`` must name as the fix: ``not-installed`` where
only the core and the family catalog exist, ``disabled`` here with the fix off. The green runs must count the fix's
events; the red runs (fix disabled) and a TE with the upstream fix (fix not-needed) count nothing.

fp8-recompute-pairing's "does not require grad" failure (``nograd-forward-context``) has no
signature to test: torch's ordinary message, with no TE frame in its traceback; its proof is the
count of ``ran-no-grad-checkpoint-directly``.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from _fp8_helpers import (
    KEY_ERROR,
    TE_INSTALLED,
    pairing_out_of_range,
    requires_te,
    run_scenarios,
    te_has_pairing_fix,
    te_has_upstream_fix,
)
from torchfix_core.testing import assert_explained_both_ways, failure_text
from torchfix_core.testing.fixtures import with_and_without_fix

pytestmark = requires_te

FIX_ID = "fp8-recompute"
PAIRING_ID = "fp8-recompute-pairing"
PAIRING_OUT_OF_RANGE = pairing_out_of_range() if TE_INSTALLED else ""

# fp8-recompute uses conftest's with_fix / without_fix (te_scenarios.py, one run each per session)
pairing_with, pairing_without = with_and_without_fix(functools.partial(run_scenarios, PAIRING_ID))


@pytest.fixture(scope="module")
def recompute_red(without_fix: dict[str, Any]) -> dict[str, Any]:
    if te_has_upstream_fix():
        pytest.skip("this TE carries the upstream fix (PR #3284): no red run")
    result = without_fix["inner-reentrant"]
    assert result["error"] == KEY_ERROR, result
    return result


def _pairing_run(request: pytest.FixtureRequest, name: str) -> dict[str, Any]:
    """``pairing_with`` / ``pairing_without``, skipped (before running) outside the validated range,
    where the pairing scenarios' TE 2.18 layout is absent."""
    if PAIRING_OUT_OF_RANGE:
        pytest.skip(PAIRING_OUT_OF_RANGE)
    result: dict[str, Any] = request.getfixturevalue(name)
    return result


@pytest.fixture(scope="module")
def pairing_red(request: pytest.FixtureRequest) -> dict[str, Any]:
    if PAIRING_OUT_OF_RANGE:
        pytest.skip(PAIRING_OUT_OF_RANGE)
    if te_has_pairing_fix():
        pytest.skip("this TE carries the upstream fix (PR #3394): no red run")
    return _pairing_run(request, "pairing_without")


PAIRING_CASES = {
    "eval-reentrant-recompute-train": KEY_ERROR,
    "eval-after-train-reentrant": "IndexError: pop from an empty deque",
}


def _pairing_case(pairing_red: dict[str, Any], case: str) -> dict[str, Any]:
    result = pairing_red[case]
    assert result["error"] == PAIRING_CASES[case], result
    return result


# -- fp8-recompute -------------------------------------------------------------------------------------


def test_recompute_red_error_is_explained_not_installed_and_disabled(recompute_red: dict[str, Any]) -> None:
    assert_explained_both_ways(failure_text(recompute_red), FIX_ID)


def test_recompute_green_run_counts_kept_state(with_fix: dict[str, Any]) -> None:
    report = with_fix["report"]
    if te_has_upstream_fix():
        assert report["state"] == "not-needed" and report["acted"] == 0, report
        return
    assert report["state"] == "applied", report
    # inner and mixed, reentrant and non-reentrant, two steps each: the FP8 layer kept its state
    assert report["events"]["kept-recompute-state"] >= 8, report
    assert report["acted"] == report["events"]["kept-recompute-state"], report


def test_recompute_disabled_run_counts_nothing(without_fix: dict[str, Any]) -> None:
    assert without_fix["report"]["state"] == "disabled" and without_fix["report"]["acted"] == 0, without_fix["report"]


# -- fp8-recompute-pairing -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(PAIRING_CASES))
def test_pairing_red_error_is_explained_not_installed_and_disabled(pairing_red: dict[str, Any], case: str) -> None:
    assert_explained_both_ways(failure_text(_pairing_case(pairing_red, case)), PAIRING_ID)


def test_pairing_green_run_counts_each_kind_of_action(request: pytest.FixtureRequest) -> None:
    report = _pairing_run(request, "pairing_with")["report"]
    if te_has_pairing_fix():
        assert report["state"] == "not-needed" and report["acted"] == 0, report
        return
    assert report["state"] == "applied", report
    events = report["events"]
    assert events["kept-eval-module-state"] > 0, report  # the eval-* scenarios
    assert events["inherited-region-without-grad-inputs"] > 0, report  # reentrant-without-grad-input
    assert events["ran-no-grad-checkpoint-directly"] > 0, report  # nograd-* (and nograd-forward-context)
    assert report["acted"] == sum(events.values()), report


def test_pairing_disabled_run_counts_nothing(request: pytest.FixtureRequest) -> None:
    report = _pairing_run(request, "pairing_without")["report"]
    assert report["state"] == "disabled" and report["acted"] == 0, report
