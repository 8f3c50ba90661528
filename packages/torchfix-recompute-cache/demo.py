"""Demo section of torchfix-recompute-cache for ``nox -s demo``: the CPU reproduction before and after.

    python packages/torchfix-recompute-cache/demo.py

Runs pytorch#166926's shape (two checkpointed blocks call one compiled function with 4 and 6 rows;
the second recompiles it with dynamic shapes) in two fresh interpreters, without and with the fix,
then a process that compiles but never checkpoints, to show that it keeps Dynamo's LRU order.
Three fresh interpreters, each compiling with backend ``aot_eager`` (about a minute each on a
loaded 2-core VM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parent / "tests" / "_scenarios.py"


def run(name: str, fix: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update(TORCHFIX_DISABLE="all", TORCHFIX_RECOMPUTE_CACHE_ENABLED="1" if fix else "0")
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(SCENARIOS), name], env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"ok": False, "error": f"scenario crashed: {proc.stderr[-800:]}", "seconds": time.perf_counter() - t0}
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - t0
    return result


def show(label: str, r: dict[str, object]) -> None:
    head = f"  {label:<22} torch {r.get('torch', '?')}, fix {r.get('state', '?')}, {r['seconds']:.1f} s: "
    lru = "LRU reordering " + ("on" if r.get("reorders") else "off")
    if r["ok"] and "grads_match" in r:
        print(head + f"OK, gradients equal the eager reference: {r['grads_match']} ({lru})")
    elif r["ok"]:
        print(head + f"OK ({lru})")
    else:
        first = str(r.get("error", "")).splitlines()[0]
        print(head + f"{str(r.get('error_type', 'error')).rsplit('.', 1)[-1]}: {first[:100]} ({lru})")


def main() -> None:
    print("== torchfix-recompute-cache: checkpoint recompute runs the compiled graph its forward ran ==")
    print("  checkpoint(f, x[4, 8]) + checkpoint(f, x[6, 8]), f = torch.compile(block), then backward:")
    show("without the fix:", run("two_checkpointed_blocks", False))
    show("with the fix:", run("two_checkpointed_blocks", True))
    print("  a process that compiles but never checkpoints, with the fix:")
    show("no checkpoint:", run("no_checkpoint", True))


if __name__ == "__main__":
    main()
