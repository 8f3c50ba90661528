"""mix-order-view-write and the compile caches, across processes on the CPU (a C++ compiler, no GPU).

A backward compiled before the fix keeps its rebinding wrapper line in the FX graph cache entry
(the entry holds the generated Python module, wrapper included). The fix's effect is
``compiled``, so torchfix-core keys the FX graph and AOTAutograd caches on it while it is applied.
Each order of the kit's ``WARM_CACHE_ORDERS`` shares one fresh ``TORCHINDUCTOR_CACHE_DIR`` between
fresh processes compiling ``(x * 3).clamp(-1, 1)`` (``cache`` in ``_scenarios.py``): fix off then
on without its key term (the red: the entry compiled without the fix is served), fix off then on
(a miss, then a hit for a third process: the term is stable), fix on then off (a miss). The graph
is a CPU one, so it has no mix-order reduction: the key, not the wrapper, is what this shows;
``test_gpu.py`` shows the same orders with the bug's own backward on a GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _util import FIX, assert_ok, run
from torchfix_core.testing import CacheStep, cache_hits, cold, outside_validated_range, warm_cache_runs


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory, bug_present: bool) -> dict[str, list[dict[str, Any]]]:
    forced = {"TORCHFIX_FORCE": FIX} if outside_validated_range(FIX) else {}

    def step(which: CacheStep, cache: Path) -> dict[str, Any]:
        # without the bug the fix is not applied and holds no term to drop
        options = [] if which.key_term or not bug_present else ["--without-key-term"]
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), **(forced if which.fix else {})}
        r = run("cache", *options, fix=which.fix, env=env)
        assert_ok(r)
        assert r["equal"] is True, r
        return r

    return warm_cache_runs(step, tmp_path_factory.mktemp("warm-cache"))


def _cold(r: dict[str, Any]) -> bool:
    return cold(r) and r["cache"]["fxgraph_miss"] >= 1


def test_entry_from_before_the_fix_served_without_key_term(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term to take away")
    off, on = orders["off, then on without its key term"]
    assert _cold(off), off["cache"]
    # with the codegen patched but no key term, the entry compiled without the fix is served
    assert cache_hits(on) >= 1, on["cache"]


def test_entry_from_before_the_fix_not_served_with_fix(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    off, on, _ = orders["off, then on"]
    assert _cold(off), off["cache"]
    if not bug_present:
        assert on["state"] == "not-needed" and cache_hits(on) >= 1, on
        return
    assert on["state"] == "applied", on
    assert _cold(on), on["cache"]
    assert on["report"]["events"]["key-changed"] >= 1, on["report"]


def test_key_term_is_stable_across_processes(orders: dict[str, list[dict[str, Any]]], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term")
    assert cache_hits(orders["off, then on"][2]) >= 1, orders["off, then on"][2]


def test_entry_compiled_with_fix_not_served_without_it(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    on, off = orders["on, then off"]
    assert _cold(on), on["cache"]
    if not bug_present:
        pytest.skip("the fix does not act on this torch: both processes compile torch's own code")
    assert off["state"] == "disabled" and _cold(off), off
