"""What torchfix adds to ``import torch``. Prints its figures; asserts nothing about time.

Three measurements, all in fresh interpreters, with whatever torchfix distributions are installed:

1. Activation itself, in-process: with torch's autoload off, time ``import torchfix_core`` plus the
   ``torch.backends`` entry point (entry-point scan, spec loading, env parsing, hook registration)
   right after ``import torch``; median over N processes, paired with the same measurement under
   ``TORCHFIX_AUTOLOAD=0`` (the floor: the entry point only records "off") in alternating processes.
2. ``-X importtime``: cumulative import time of every torchfix module and of anything torchfix
   made ``import torch`` load that it would not load otherwise.
3. Paired wall clock of ``python -c "import torch"``: activation on vs ``TORCHFIX_AUTOLOAD=0``,
   alternating in pairs; median ratio and median difference (noise is large next to 2 ms).

Also checks that activation imports no ``torch._dynamo`` / ``torch._inductor`` module.

    python benchmarks/import_time.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

ACTIVATION = r"""
import json, sys, time
import torch
before = set(sys.modules)
t0 = time.perf_counter()
import torchfix_core._activation
torchfix_core._activation.torch_backends_entry()
t1 = time.perf_counter()
new = sorted(set(sys.modules) - before)
from torchfix_core import status
print(json.dumps({"ms": (t1 - t0) * 1e3, "new_modules": new, "states": {r.id: r.state for r in status()}}))
"""


def child_env(**extra: str) -> dict[str, str]:
    from torchfix_core.testing import clean_environ

    env = {k: v for k, v in clean_environ().items() if not k.startswith("TORCH_DEVICE_BACKEND")}
    env.update(extra)
    return env


def run(code: str, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", code], env=env, capture_output=True, text=True, check=True)


def activation_cost(runs: int) -> tuple[list[float], list[float], dict]:
    """In-process cost of activation with torchfix on, and with ``TORCHFIX_AUTOLOAD=0`` (what the
    entry point costs when it only records "off"), measured in alternating processes so that both
    see the same machine load."""
    on, off, last = [], [], {}
    for i in range(runs):
        order = [("on", {}), ("off", {"TORCHFIX_AUTOLOAD": "0"})]
        if i % 2:
            order.reverse()
        for name, extra in order:
            result = json.loads(
                run(ACTIVATION, child_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0", **extra)).stdout.strip().splitlines()[-1]
            )
            (on if name == "on" else off).append(result["ms"])
            if name == "on":
                last = result
    return on, off, last


def importtime(env: dict[str, str]) -> dict[str, int]:
    """Module -> self time in microseconds, from -X importtime of `import torch` (self times, so that
    nested imports are not counted twice)."""
    out: dict[str, int] = {}
    for line in run("import torch", env, "-X", "importtime").stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, _, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if self_us.isdigit():
            out[name] = int(self_us)
    return out


def wall(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    run("import torch", env)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    samples, floor, last = activation_cost(args.runs)
    heavy = [m for m in last["new_modules"] if m.startswith(("torch._dynamo", "torch._inductor"))]
    new_torch = [m for m in last["new_modules"] if m == "torch" or m.startswith("torch.")]
    print(
        f"torch {run('import torch; print(torch.__version__)', child_env()).stdout.strip()}, Python {sys.version.split()[0]}"
    )
    print(f"fixes installed: {json.dumps(last['states'])}")
    print(
        f"[1] activation in-process: median {statistics.median(samples):.2f} ms, min {min(samples):.2f} ms, "
        f"max {max(samples):.2f} ms over {args.runs} processes"
    )
    added = [a - b for a, b in zip(samples, floor)]
    print(
        f"    with TORCHFIX_AUTOLOAD=0: median {statistics.median(floor):.2f} ms (min {min(floor):.2f} ms); "
        f"added by activation proper (paired): median {statistics.median(added):.2f} ms"
    )
    print(f"    modules activation added: {len(last['new_modules'])}; torch.* among them: {new_torch or 'none'}")
    print(f"    torch._dynamo / torch._inductor imported by activation: {heavy or 'none'}")

    on, off = importtime(child_env()), importtime(child_env(TORCHFIX_AUTOLOAD="0"))
    ours = sum(us for m, us in on.items() if m.startswith("torchfix"))
    ours_off = sum(us for m, us in off.items() if m.startswith("torchfix"))
    extra = {m: us for m, us in on.items() if m not in off and not m.startswith("torchfix")}
    print(
        f"[2] -X importtime self times: torchfix modules {ours / 1e3:.2f} ms with activation "
        f"({ours_off / 1e3:.2f} ms with TORCHFIX_AUTOLOAD=0); other modules loaded only with activation: "
        f"{extra or 'none'}"
    )

    pairs = []
    for i in range(args.runs):
        order = [("on", child_env()), ("off", child_env(TORCHFIX_AUTOLOAD="0"))]
        if i % 2:
            order.reverse()
        times = {name: wall(env) for name, env in order}
        pairs.append((times["on"], times["off"]))
    ratios = [a / b for a, b in pairs]
    diffs = [(a - b) * 1e3 for a, b in pairs]
    print(
        f"[3] paired wall clock of `import torch` ({args.runs} pairs): median on {statistics.median(p[0] for p in pairs) * 1e3:.0f} ms, "
        f"off {statistics.median(p[1] for p in pairs) * 1e3:.0f} ms, median ratio {statistics.median(ratios):.4f}, "
        f"median difference {statistics.median(diffs):+.1f} ms (noise: stdev of differences {statistics.pstdev(diffs):.1f} ms)"
    )
    return 1 if heavy else 0


if __name__ == "__main__":
    raise SystemExit(main())
