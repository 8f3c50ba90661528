"""Warm-cache tests: a compile cache never undoes a fix (what every fix of effect ``compiled`` proves).

A fix that changes what torch compiles from the same graph is keyed in the FX graph and AOTAutograd
caches by torchfix-core (:mod:`torchfix_core._cache_key`). Its test shares one
``TORCHINDUCTOR_CACHE_DIR`` between fresh processes, in the orders of :data:`WARM_CACHE_ORDERS`:

* ``off, then on``: a process without the fix fills the cache (the bug), then one with it must not
  be served that artifact (a miss, and the reproduction is repaired), then another with it reuses
  its own (a hit: the term is the same in every process, warm caches keep working);
* ``on, then off``: a process with the fix fills it, then one without must miss (it compiles what
  unpatched torch compiles; the fix's artifact is never served under another key's claim);
* ``off, then on without its key term``: the same as the first two steps with the fix applied but
  its term dropped (:func:`drop_cache_key_term`): what a fix without the key term got, the red
  half of the test (the artifact compiled without the fix is served and the bug comes back).

The test gives :func:`warm_cache_runs` a function that runs one :class:`CacheStep` in a fresh
interpreter with the cache directory it is given and returns the scenario's JSON result, in which
:func:`compile_cache_counters` (called by the scenario script at its end) sits under ``"cache"``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

__all__ = [
    "WARM_CACHE_ORDERS",
    "CacheStep",
    "cache_hits",
    "cold",
    "compile_cache_counters",
    "drop_cache_key_term",
    "warm_cache_runs",
]


@dataclasses.dataclass(frozen=True, slots=True)
class CacheStep:
    """One process of a warm-cache order: the fix on or off, and (on) whether it keeps its key term."""

    fix: bool
    key_term: bool = True

    @property
    def name(self) -> str:
        if not self.fix:
            return "off"
        return "on" if self.key_term else "on without its key term"


OFF, ON = CacheStep(False), CacheStep(True)
#: order name -> the processes that share one fresh cache directory, in turn
WARM_CACHE_ORDERS: dict[str, tuple[CacheStep, ...]] = {
    "off, then on": (OFF, ON, ON),
    "on, then off": (ON, OFF),
    "off, then on without its key term": (OFF, CacheStep(True, key_term=False)),
}


def warm_cache_runs(
    run_step: Callable[[CacheStep, Path], dict[str, Any]], root: Path
) -> dict[str, list[dict[str, Any]]]:
    """Run every order of :data:`WARM_CACHE_ORDERS`, each in its own fresh cache directory under
    ``root``; returns order name -> the results of its steps, in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for index, (order, steps) in enumerate(WARM_CACHE_ORDERS.items()):
        cache = root / f"cache-{index}"
        cache.mkdir(parents=True, exist_ok=False)
        out[order] = [run_step(step, cache) for step in steps]
    return out


def compile_cache_counters() -> dict[str, int]:
    """This process's FX graph and AOTAutograd cache hits and misses (torch's own counters)."""
    from torch._dynamo.utils import counters

    return {
        "fxgraph_hit": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fxgraph_miss": int(counters["inductor"]["fxgraph_cache_miss"]),
        "aot_hit": int(counters["aot_autograd"]["autograd_cache_hit"]),
        "aot_miss": int(counters["aot_autograd"]["autograd_cache_miss"]),
    }


def cache_hits(result: dict[str, Any]) -> int:
    """FX graph plus AOTAutograd cache hits of one step's result (its ``"cache"`` counters)."""
    counters = result["cache"]
    return int(counters["fxgraph_hit"] + counters["aot_hit"])


def cold(result: dict[str, Any]) -> bool:
    """The step compiled afresh: no FX graph or AOTAutograd cache hit, at least one miss."""
    counters = result["cache"]
    return cache_hits(result) == 0 and counters["fxgraph_miss"] + counters["aot_miss"] >= 1


def drop_cache_key_term(fix_id: str) -> None:
    """In a scenario script, after ``fix_id`` was applied: take its compile-cache key term away, the
    fix's patches staying in place (the red half of a warm-cache test: what torchfix did before the
    key term). AssertionError when the fix holds no term."""
    from torchfix_core import _cache_key

    if fix_id not in _cache_key.terms():
        raise AssertionError(f"{fix_id} holds no compile-cache key term (applied? effect compiled?)")
    _cache_key.remove_term(fix_id)
