"""fp8-minmax-store's cache key term, across processes on the CPU (a C++ compiler, no GPU).

A kernel compiled before the fix keeps its ``PropagateNan`` min/max in the FX graph cache entry
(the entry holds the generated Python module, Triton source included). Without a key term a process
with the fix would load it: the fix would not act for every graph compiled before it was
installed. Four processes share one fresh ``TORCHINDUCTOR_CACHE_DIR``, in order: fix off (cold),
fix off (reuses the entry: what a patched codegen alone would get), fix on (a miss: the key term
keeps it from the entry compiled without the fix), fix on (a hit: the term is the same in every
process, so the fix's own entries are reused). The graph is a CPU one, so its kernel is C++: the
key, not the kernel, is what this shows; ``test_gpu.py`` shows the same order with Triton kernels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _util import FIX, assert_ok, run
from torchfix_core.testing import outside_validated_range


def _hits(r: dict[str, Any]) -> int:
    return int(r["counters"]["fxgraph_hit"] + r["counters"]["aot_hit"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    cache_dir = Path(tmp_path_factory.mktemp("inductor-cache"))
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    forced = {"TORCHFIX_FORCE": FIX} if outside_validated_range(FIX) else {}
    out = {}
    for name, fix in (("cold", False), ("off", False), ("on", True), ("on again", True)):
        out[name] = run("cache", fix=fix, env={**env, **(forced if fix else {})})
        assert_ok(out[name])
        assert out[name]["equal"] is True, out[name]
    return out


def test_entry_from_before_the_fix_reused_fails_without_fix(runs: dict[str, dict[str, Any]]) -> None:
    assert _hits(runs["cold"]) == 0 and runs["cold"]["counters"]["fxgraph_miss"] >= 1, runs["cold"]
    # a second process without the fix is served the first one's entry
    assert _hits(runs["off"]) >= 1, runs["off"]


def test_entry_from_before_the_fix_not_reused_passes_with_fix(
    runs: dict[str, dict[str, Any]], bug_present: bool
) -> None:
    on = runs["on"]
    if not bug_present:
        assert on["state"] == "not-needed" and _hits(on) >= 1, on
        return
    assert on["state"] == "applied", on
    assert _hits(on) == 0 and on["counters"]["fxgraph_miss"] >= 1, on
    assert on["report"]["events"]["key-changed"] >= 1, on["report"]


def test_key_term_is_stable_across_processes(runs: dict[str, dict[str, Any]], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term")
    assert _hits(runs["on again"]) >= 1, runs["on again"]
