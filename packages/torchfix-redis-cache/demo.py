"""Demo section of torchfix-redis-cache for ``nox -s demo``: the shipped reproduction before and after.

    python packages/torchfix-redis-cache/demo.py

Runs ``torchfix_redis_cache.reproduction:refused_write`` (CPU, a real ``redis-server`` that refuses
every write) in a fresh interpreter without and with ``redis-cache-errors``: one compiled training
step with torch's Redis remote caches on. About 15 s per line.
"""

from __future__ import annotations

from typing import Any, Mapping

from torchfix_core.testing import demo_line, demo_reproduction

FIX = "redis-cache-errors"


def describe(r: Mapping[str, Any]) -> str:
    outcome = r["outcome"]
    word = {"observed": "BUG", "not-observed": "OK"}.get(outcome["result"], "SKIPPED")
    return f"fix {r.get('state', '?')}, {r['seconds']:.1f} s: {word}: {outcome['measure'] or outcome['detail']}"


def main() -> None:
    print("== torchfix-redis-cache: a Redis server refusing torch's remote-cache writes ==")
    for label, on in (("without the fix:", False), ("with the fix:", True)):
        print(demo_line(label, describe, demo_reproduction(FIX, on)))


if __name__ == "__main__":
    main()
