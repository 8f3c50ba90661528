"""Demo section of torchfix-sac-replay for ``nox -s demo``: the CPU reproduction before and after.

    python packages/torchfix-sac-replay/demo.py

Runs BRIEF section 3.4 (recompute-time guard miss with ``backward()`` on another thread, the CPU
stand-in for CUDA's autograd worker) in two fresh interpreters, without and with the fix, then the
compiled-forward/eager-replay mismatch with the fix to show the explained error. About 30-40 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parent / "tests" / "sac_scenarios.py"


def run(name: str, fix: bool, *args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update(TORCHFIX_DISABLE="all", TORCHFIX_SAC_REPLAY_ENABLED="1" if fix else "0")
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(SCENARIOS), name, *args], env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"ok": False, "error": f"scenario crashed: {proc.stderr[-800:]}", "seconds": time.perf_counter() - t0}
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - t0
    return result


def show(label: str, r: dict[str, object]) -> None:
    head = f"  {label:<34} torch {r.get('torch', '?')}, fix {r.get('fix', '?')}, {r['seconds']:.1f} s: "
    if r["ok"]:
        print(head + f"OK (gradients equal the eager reference: {r.get('grad_match')})")
    else:
        first = str(r.get("error", "")).splitlines()[0]
        print(head + f"{str(r.get('error_type', 'error')).replace('builtins.', '')}: {first[:110]}")


def main() -> None:
    print("== torchfix-sac-replay: checkpoint recompute runs under the forward's compiler config ==")
    print("  compiled block with 8 cache entries, recompile_limit=64 on the main thread, SAC checkpoint,")
    print("  a guarded global flips before backward(), backward() on a threading.Thread (CPU stand-in")
    print("  for the CUDA autograd worker thread):")
    show("without the fix (disabled):", run("guard_miss", False))
    show("with the fix:", run("guard_miss", True))
    print("  compiled forward replayed eagerly (BRIEF 1.1), with the fix: the error says why")
    r = run("eager_replay", True)
    if r["ok"]:
        print("  (no error: the fix is not needed on this torch)")
    else:
        text = str(r["error"])
        start = text.find("[torchfix sac-replay]")
        for line in (text[start:] if start >= 0 else text).splitlines():
            print("    " + line)
        print(f"    __cause__: {r.get('cause_type')}: {str(r.get('cause')).splitlines()[0][:100]}")
    backward_context()
    storage_key()


CONTEXT_SCENARIOS = Path(__file__).resolve().parent / "tests" / "backward_context_scenarios.py"


def backward_context() -> None:
    """backward-context: two compiled backwards of one backward() at the same time (pytorch#185372)."""
    print("== torchfix-sac-replay backward-context: each compiled backward in its own copy of the context ==")
    print("  region A's compiled backward on the calling thread, region B's on a second device's autograd")
    print("  worker thread (torch's Python PrivateUse1 backend stands in for a GPU), both inside at once:")
    for label, fix in (("without the fix (disabled):", False), ("with the fix:", True)):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
        env.update(TORCHFIX_DISABLE="all", TORCHFIX_BACKWARD_CONTEXT_ENABLED="1" if fix else "0")
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(CONTEXT_SCENARIOS), "--timeout", "10"], env=env, capture_output=True, text=True
        )
        seconds = time.perf_counter() - t0
        if proc.returncode != 0 or not proc.stdout.strip():
            print(f"  {label:<34} scenario crashed: {proc.stderr[-400:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        head = f"  {label:<34} torch {r['torch']}, fix {r['backward-context']}, {seconds:.1f} s: "
        if r["ok"]:
            threads = sorted({row["thread"] for row in r["seen"]})
            print(head + f"OK on threads {threads}, gradients correct: {r['grad_ok']}")
        else:
            print(head + f"{r['error_type'].replace('builtins.', '')}: {r['error'][:100]}")


STORAGE_KEY_SCENARIOS = Path(__file__).resolve().parent / "tests" / "storage_key_scenarios.py"


def storage_key() -> None:
    """sac-storage-key: a recompute that skips a cached compiled region (pytorch#175258)."""
    print("== torchfix-sac-replay sac-storage-key: one SAC queue per compiled region ==")
    print("  upstream's regression test: SAC saves inductor_compiled_code, a compiled arange is cached in a")
    print("  dict in the forward, so the recompute skips it; then the same with plain tensors of equal shapes:")
    for scenario in ("upstream", "silent"):
        for label, fix in (("without the fix (disabled):", False), ("with the fix:", True)):
            env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
            env.update(TORCHFIX_DISABLE="all", TORCHFIX_SAC_STORAGE_KEY_ENABLED="1" if fix else "0")
            env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, str(STORAGE_KEY_SCENARIOS), scenario], env=env, capture_output=True, text=True
            )
            seconds = time.perf_counter() - t0
            if proc.returncode != 0 or not proc.stdout.strip():
                print(f"  {scenario:<8} {label:<28} scenario crashed: {proc.stderr[-400:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            head = f"  {scenario:<8} {label:<28} torch {r['torch']}, fix {r['fix']}, {seconds:.1f} s: "
            if r["ok"]:
                print(head + f"OK, gradient correct: {r['grad_match']}")
            else:
                print(head + f"{r['error_type'].replace('builtins.', '')}: {r['error'][:90]}")


if __name__ == "__main__":
    main()
