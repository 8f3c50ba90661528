"""The signatures and report counts of this package's three fixes, on the running torch.

For each fix, the red run of its own reproduction (fix off, real unpatched torch) is taken once per
module and its captured error output is given to ``torchfix-doctor explain``: with nothing but the
core importable (no fix installed, no torch) explain names the fix as ``not-installed`` from the
family catalog; in this environment with the fix turned off, as ``disabled``. The green run (fix
on) shows the fix acted (``torchfix_core.report()``: ``acted > 0``, the event that says how); a run
with the fix off, or where its probe says ``not-needed``, shows ``acted == 0``.

* sac-replay: ``reproduction_sac_replay.py guard_miss`` (backward on a second thread); event
  ``recompute-in-forward-context``.
* sac-storage-key: ``reproduction_sac_storage_key.py upstream`` (upstream's DTensor regression test) and
  ``silent`` (the wrong gradient, the silent signature's proof); event ``keyed-region-queue``.
* backward-context: ``reproduction_backward_context.py`` (two compiled backwards at once); event
  ``copied-context``.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
import torch._higher_order_ops.wrap
from conftest import run_storage_key, scenario, storage_key_bug_present
from torchfix_core.testing import applied_report, assert_explained_both_ways, failure_text, state_to_expect
from torchfix_core.testing.fixtures import with_and_without_fix

BACKWARD_CONTEXT = "backward-context"
STORAGE_KEY = "sac-storage-key"
SAC_REPLAY = "sac-replay"


def _red(result: dict[str, Any], present: bool, fix_id: str) -> dict[str, Any]:
    """The red run's result, or a skip where the bug is absent on this torch."""
    if not present:
        pytest.skip(f"{fix_id}: the bug is absent on torch {torch.__version__} (the red run passes)")
    assert not result["ok"], f"{fix_id}: the red run did not fail: {result}"
    assert result["report"]["acted"] == 0, result["report"]
    return result


# -- sac-replay ------------------------------------------------------------------------------------
#: ``guard_miss_with`` / ``guard_miss_without``: ``reproduction_sac_replay.py guard_miss``, once a module each
guard_miss_with, guard_miss_without = with_and_without_fix(lambda fix: scenario("guard_miss", fix=fix))


def test_sac_replay_red_run_is_explained(guard_miss_without: dict[str, Any], bug_present: bool) -> None:
    red = _red(guard_miss_without, bug_present, SAC_REPLAY)
    assert "not found in storage" in red["error"], red["error"]
    assert_explained_both_ways(failure_text(red), SAC_REPLAY)


def test_sac_replay_green_run_reports_recomputes(guard_miss_with: dict[str, Any], bug_present: bool) -> None:
    report = guard_miss_with["report"]
    assert guard_miss_with["ok"], guard_miss_with.get("traceback")
    assert report["state"] == state_to_expect(SAC_REPLAY, bug_present), report  # torch 2.8/2.9: out-of-range
    if report["state"] != "applied":
        assert report["acted"] == 0, report
        return
    assert report["events"]["recompute-in-forward-context"] > 0, report
    assert report["events"]["explained-replay-error"] == 0, report


def test_sac_replay_disabled_run_reports_nothing(guard_miss_without: dict[str, Any]) -> None:
    assert guard_miss_without["report"]["state"] == "disabled", guard_miss_without["report"]
    assert guard_miss_without["report"]["acted"] == 0, guard_miss_without["report"]


# -- sac-storage-key -------------------------------------------------------------------------------
needs_hop = pytest.mark.skipif(
    not hasattr(torch._higher_order_ops.wrap, "inductor_compiled_code"), reason="torch has no inductor_compiled_code"
)


@pytest.fixture(scope="module")
def storage_key_present() -> bool:
    return storage_key_bug_present()


#: ``upstream_with`` / ``upstream_without``: ``reproduction_sac_storage_key.py upstream``, once a module each
upstream_with, upstream_without = with_and_without_fix(lambda fix: run_storage_key("upstream", fix=fix))


@needs_hop
def test_sac_storage_key_red_run_is_explained(upstream_without: dict[str, Any], storage_key_present: bool) -> None:
    red = _red(upstream_without, storage_key_present, STORAGE_KEY)
    assert "recompute_fn" in red["traceback"], "the failure should be raised inside the recompute"
    assert_explained_both_ways(failure_text(red), STORAGE_KEY)


@needs_hop
def test_sac_storage_key_message_alone_is_not_claimed(
    upstream_without: dict[str, Any], storage_key_present: bool
) -> None:
    """The messages are ordinary ones: without the recompute's frames explain must not name the fix."""
    red = _red(upstream_without, storage_key_present, STORAGE_KEY)
    from torchfix_core.testing import explain_json

    bare = {k: v for k, v in red.items() if k != "traceback"}
    report = explain_json(failure_text(bare), isolated=True)
    assert STORAGE_KEY not in {m["id"] for m in report["matches"]}, report["matches"]


@needs_hop
def test_sac_storage_key_green_runs_report_keyed_regions(
    upstream_with: dict[str, Any], storage_key_present: bool
) -> None:
    report = applied_report(upstream_with, storage_key_present)
    if report is None:
        return
    assert report["events"]["keyed-region-queue"] > 0, report
    # the silent symptom (wrong gradient, no error): the report is the proof the fix acted there
    silent = run_storage_key("silent", fix=True)
    assert silent["ok"] and silent["grad_match"], silent
    assert silent["report"]["events"]["keyed-region-queue"] > 0, silent["report"]


@needs_hop
def test_sac_storage_key_disabled_run_reports_nothing(upstream_without: dict[str, Any]) -> None:
    assert upstream_without["report"]["state"] == "disabled", upstream_without["report"]
    assert upstream_without["report"]["acted"] == 0, upstream_without["report"]


# -- backward-context ------------------------------------------------------------------------------
needs_python_backend = pytest.mark.skipif(
    not hasattr(importlib.import_module("torch.utils.backend_registration"), "_DummyBackendModule"),
    reason="torch has no Python device backend (_DummyBackendModule) for the second device",
)


@pytest.fixture(scope="module")
def concurrent_without() -> dict[str, Any]:
    from test_backward_context_repro import run

    return run(fix=False)


@pytest.fixture(scope="module")
def concurrent_with() -> dict[str, Any]:
    from test_backward_context_repro import run

    return run(fix=True)


@pytest.fixture(scope="module")
def context_bug_present() -> bool:
    from test_backward_context_repro import BUG_PRESENT

    return BUG_PRESENT


@needs_python_backend
def test_backward_context_red_run_is_explained(concurrent_without: dict[str, Any], context_bug_present: bool) -> None:
    red = _red(concurrent_without, context_bug_present, BACKWARD_CONTEXT)
    assert "is already entered" in red["error"], red["error"]
    assert_explained_both_ways(failure_text(red), BACKWARD_CONTEXT)


@needs_python_backend
def test_backward_context_green_run_reports_copies(concurrent_with: dict[str, Any], context_bug_present: bool) -> None:
    report = applied_report(concurrent_with, context_bug_present)
    if report is None:
        return
    # the measured backward runs two compiled backwards, the warm-up two more: each in its own copy
    assert report["events"]["copied-context"] >= 2, report


@needs_python_backend
def test_backward_context_disabled_run_reports_nothing(concurrent_without: dict[str, Any]) -> None:
    assert concurrent_without["report"]["state"] == "disabled", concurrent_without["report"]
    assert concurrent_without["report"]["acted"] == 0, concurrent_without["report"]
