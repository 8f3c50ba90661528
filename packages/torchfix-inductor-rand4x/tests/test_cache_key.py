"""inductor-rand4x-dropout and the compile caches, across processes on the CPU (a C++ compiler, no GPU).

A kernel compiled before the fix keeps its ``rand4x`` draw in the FX graph cache entry (the entry
holds the generated Python module, Triton source included), and torch 2.13 / 2.14 hash no setting of
the 4x path. The fix's effect is ``compiled``, so torchfix-core keys the FX graph and AOTAutograd
caches on it while it is applied. Each order of the kit's ``WARM_CACHE_ORDERS`` shares one fresh
``TORCHINDUCTOR_CACHE_DIR`` between fresh processes compiling ``(x * 3).clamp(-1, 1)`` (``cache`` in
``_scenarios.py``): fix off then on without its key term (the red: the entry compiled without the fix
is served), fix off then on (a miss, then a hit for a third process: the term is stable), fix on then
off (a miss). The graph is a CPU one, so its kernel is C++: the key, not the kernel, is what this
shows; ``test_gpu.py`` shows the same orders with the dropout's Triton kernels. A last test shows
that opting in (``TORCHINDUCTOR_USE_RAND4X=1``) changes the key too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _util import FIX, OPT_IN, assert_ok, run
from torchfix_core.testing import CacheStep, cache_hits, cold, outside_validated_range, warm_cache_runs


def _step(
    cache: Path, *, fix: bool, options: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> dict[str, Any]:
    forced = {"TORCHFIX_FORCE": FIX} if fix and outside_validated_range(FIX) else {}
    r = run("cache", *options, fix=fix, env={"TORCHINDUCTOR_CACHE_DIR": str(cache), **forced, **(env or {})})
    assert_ok(r)
    assert r["equal"] is True, r
    return r


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory, bug_present: bool) -> dict[str, list[dict[str, Any]]]:
    def step(which: CacheStep, cache: Path) -> dict[str, Any]:
        # without the bug the fix is not applied and holds no term to drop
        options = () if which.key_term or not bug_present else ("--without-key-term",)
        return _step(cache, fix=which.fix, options=options)

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


def test_opting_in_changes_the_key(tmp_path: Path, bug_present: bool) -> None:
    """An entry compiled with the fix (``tl.rand``) is not served to a process that opted into the 4x
    path with upstream's switch, which compiles its own (``rand4x``) kernels."""
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term")
    on = _step(tmp_path, fix=True)
    opted_in = _step(tmp_path, fix=True, env={OPT_IN: "1"})
    assert _cold(on), on["cache"]
    assert opted_in["state"] == "applied" and _cold(opted_in), opted_in
