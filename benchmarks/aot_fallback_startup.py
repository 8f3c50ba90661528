"""Second-process start-up of an AOT-unsupported model: JIT vs AOT attempt (no memo) vs memo.

Usage: python benchmarks/aot_fallback_startup.py [--repeats 5] [--backend inductor] [--layers 24]

Each scenario runs in fresh interpreters sharing one warm ``TORCHINDUCTOR_CACHE_DIR`` (every
scenario runs once untimed first, which also writes the memo). Timed: ``import torch`` excluded,
from just before compiling to the first output (``startup``), and the whole process wall time.

* ``jit``       ``torch.compile(model)(x)``: the goal line.
* ``aot-nomemo`` ``torch.compile(model, fullgraph=True).aot_compile(...)`` with torchfix,
  ``TORCHFIX_AOT_FALLBACK_MEMO=0``: every process pays the doomed AOT capture, then JIT.
* ``aot-memo``  same call, memo on: the second process skips the AOT capture.

Goal: ``aot-memo`` within 5 % of ``jit``. Prints a table; needs torchfix-core and
torchfix-aot-fallback installed next to torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch, torch._dynamo
torch._dynamo.config.enable_aot_compile = True
t_import = time.perf_counter()
LAYERS = int(os.environ["BENCH_LAYERS"])
torch.manual_seed(0)
weights = [torch.randn(64, 64) / 8 for _ in range(LAYERS)]

def model(x):
    for i, w in enumerate(weights):
        x = torch.tanh(x @ w) + x
        if i == LAYERS - 2:
            torch._dynamo.graph_break()  # AOT capture fails late, after tracing most of the model
    return x.sum(dim=-1)

x = torch.randn(32, 64)
mode = os.environ["BENCH_MODE"]
backend = os.environ["BENCH_BACKEND"]
t1 = time.perf_counter()
if mode == "jit":
    fn = torch.compile(model, backend=backend)
else:
    fn = torch.compile(model, fullgraph=True, backend=backend).aot_compile(((x,), {}))
out = fn(x)
t2 = time.perf_counter()
assert torch.allclose(out, model(x), atol=1e-4)
kinds = []
try:
    from torchfix_aot_fallback import api
    kinds = [r.kind for r in api.fallbacks()]
except Exception:
    pass
print("BENCH " + json.dumps({"startup": t2 - t1, "import": t_import - t0, "kinds": kinds}))
"""


def run_once(mode: str, env: dict[str, str]) -> dict[str, object]:
    child_env = dict(env, BENCH_MODE=mode)
    if mode == "aot-nomemo":
        child_env["TORCHFIX_AOT_FALLBACK_MEMO"] = "0"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD], env=child_env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH "))
    data = json.loads(line[len("BENCH ") :])
    data["wall"] = wall
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--layers", type=int, default=24)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="aotfb-bench-")
    from torchfix_core.testing import clean_environ

    env = clean_environ()
    env.update(
        TORCHINDUCTOR_CACHE_DIR=cache,
        TORCHINDUCTOR_COMPILE_THREADS=os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"),
        BENCH_LAYERS=str(args.layers),
        BENCH_BACKEND=args.backend,
    )
    modes = ["jit", "aot-nomemo", "aot-memo"]
    for mode in modes:  # warm the Inductor caches and write the memo
        run_once(mode, env)
    results: dict[str, list[dict[str, object]]] = {m: [] for m in modes}
    for _ in range(args.repeats):  # interleaved, so drift hits every scenario alike
        for mode in modes:
            results[mode].append(run_once(mode, env))
    import torch

    print(f"torch {torch.__version__}, backend={args.backend}, layers={args.layers}, repeats={args.repeats}, cpu")
    print(
        f"{'scenario':<12} {'startup median s':>17} {'vs jit':>8} {'wall median s':>14} {'vs jit':>8}  startup runs s; fallback records"
    )
    base_s = statistics.median(float(r["startup"]) for r in results["jit"])  # type: ignore[arg-type]
    base_w = statistics.median(float(r["wall"]) for r in results["jit"])  # type: ignore[arg-type]
    for mode in modes:
        s = statistics.median(float(r["startup"]) for r in results[mode])  # type: ignore[arg-type]
        w = statistics.median(float(r["wall"]) for r in results[mode])  # type: ignore[arg-type]
        kinds = results[mode][-1]["kinds"]
        runs = ", ".join(f"{float(r['startup']):.2f}" for r in results[mode])  # type: ignore[arg-type]
        print(
            f"{mode:<12} {s:>17.3f} {100 * (s / base_s - 1):>+7.1f}% {w:>14.3f} {100 * (w / base_w - 1):>+7.1f}%"
            f"  [{runs}]; {kinds}"
        )


if __name__ == "__main__":
    main()
