"""Demo section of torchfix-redis-cache for ``nox -s demo``: the shipped reproduction before and after.

    python packages/torchfix-redis-cache/demo.py

Runs ``torchfix_redis_cache.reproduction:refused_write`` (CPU, a real ``redis-server`` that refuses
every write) in a fresh interpreter without and with ``redis-cache-errors``: one compiled training
step with torch's Redis remote caches on. About 15 s per line.
"""

from __future__ import annotations

from typing import Any, Mapping

from torchfix_core.testing import demo_line, only_fix, run_json_script_timed

FIX = "redis-cache-errors"


def describe(r: Mapping[str, Any]) -> str:
    outcome = r["outcome"]
    word = {"observed": "BUG", "not-observed": "OK"}.get(outcome["result"], "SKIPPED")
    return f"fix {r.get('state', '?')}, {r['seconds']:.1f} s: {word}: {outcome['measure'] or outcome['detail']}"


def main() -> None:
    print("== torchfix-redis-cache: a Redis server refusing torch's remote-cache writes ==")
    for label, on in (("without the fix:", False), ("with the fix:", True)):
        r = run_json_script_timed(["-m", "torchfix_core.reproduction", FIX], env=only_fix(FIX, on))
        r.setdefault("ok", "outcome" in r)
        r.setdefault("error", r.get("broke", ""))
        print(demo_line(label, describe, r))


if __name__ == "__main__":
    main()
