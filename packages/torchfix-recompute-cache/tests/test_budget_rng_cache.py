"""budget-rng and the compile caches: an artifact compiled without the fix is never served with it.

budget-rng changes the partition AOTAutograd compiles from the same graph, which torch's FX graph
and AOTAutograd cache keys cannot see; torchfix-core keys both on the fix while it is applied (its
spec's effect is ``compiled``). Each order of the kit's ``WARM_CACHE_ORDERS`` shares one fresh
``TORCHINDUCTOR_CACHE_DIR`` between fresh interpreters (budget-rng alone on or off, every other fix
off), each compiling ``sin(2 * dropout(x, 0.5))`` with inductor at ``activation_memory_budget = 0.5``
(``dropout_cached`` in ``_budget_rng_harness.py``):

* off, then on without its key term (the red: what the fix was before the key term): the second
  process is served the first one's artifact and its gradient uses a fresh dropout mask;
* off, then on: the second process misses, compiles with the fix and gets the forward's mask; a
  third reuses the second one's entries (the term is stable across processes);
* on, then off: the process without the fix misses and compiles what unpatched torch compiles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_budget_rng import assert_right_mask, assert_wrong_mask, needs_range, run
from torchfix_core.testing import CacheStep, cache_hits, cold, warm_cache_runs

pytestmark = needs_range

BUDGET = "0.5"


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    def step(which: CacheStep, cache: Path) -> dict[str, Any]:
        options = [] if which.key_term else ["--without-key-term"]
        return run(["dropout_cached", BUDGET, *options], which.fix, cache, harness=True)

    return warm_cache_runs(step, tmp_path_factory.mktemp("warm-cache"))


def assert_cold(r: dict[str, Any]) -> None:
    assert cold(r) and r["cache"]["aot_miss"] >= 1, r["cache"]


def test_warm_cache_from_before_the_fix_serves_the_bug_without_key_term(
    orders: dict[str, list[dict[str, Any]]],
) -> None:
    off, on = orders["off, then on without its key term"]
    assert off["state"] == "disabled", off
    assert_cold(off)
    assert_wrong_mask(off)
    assert on["state"] == "applied" and "NOT keyed" in on["reason"], on["reason"]
    assert cache_hits(on) >= 1, on["cache"]  # the artifact compiled without the fix is served ...
    assert_wrong_mask(on)  # ... and the fix is undone


def test_warm_cache_from_before_the_fix_not_served_with_fix(orders: dict[str, list[dict[str, Any]]]) -> None:
    off, on, on_again = orders["off, then on"]
    assert_cold(off)
    assert_wrong_mask(off)
    assert on["state"] == "applied" and "cache keys carry its term (budget-rng " in on["reason"], on["reason"]
    assert_cold(on)  # the term keeps it from the entries compiled without the fix
    assert_right_mask(on, tolerance=1e-5)  # inductor's vectorized cos differs by an ulp
    assert on["report"]["acted"] >= 1, on["report"]


def test_key_term_is_stable_across_processes(orders: dict[str, list[dict[str, Any]]]) -> None:
    on_again = orders["off, then on"][2]
    assert on_again["cache"]["aot_hit"] >= 1, on_again["cache"]  # the fix's own artifact is reused
    assert_right_mask(on_again, tolerance=1e-5)


def test_artifact_compiled_with_fix_not_served_without_it(orders: dict[str, list[dict[str, Any]]]) -> None:
    on, off = orders["on, then off"]
    assert_cold(on)
    assert_right_mask(on, tolerance=1e-5)
    assert off["state"] == "disabled", off
    assert_cold(off)  # compiles what unpatched torch compiles
    assert_wrong_mask(off)
