"""Steady-state cost of torchfix on a training step: all installed fixes vs TORCHFIX_DISABLE=all.

A compiled MLP block under selective activation checkpointing (eager checkpoint around the compiled
block: the layout every SAC-related fix touches), trained on the CPU. Each configuration runs in its
own process; processes alternate for --rounds rounds; each process warms up (compiles) and then
times --steps steps. Prints per-round medians and the ratio on/off (goal: <= 1.01).

    python benchmarks/steady_state_step.py [--rounds 4] [--steps 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import functools, json, statistics, sys, threading, time
import torch
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
torch.manual_seed(0)
torch.set_num_threads(1)
steps = int(sys.argv[1])
block = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
compiled = torch.compile(block)
opt = torch.optim.SGD(block.parameters(), lr=1e-3)
policy = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
x = torch.randn(64, 256)

def step():
    out = checkpoint(compiled, x, use_reentrant=False, context_fn=policy)
    loss = out.square().mean()
    # backward from a worker thread, as the CUDA autograd engine does
    t = threading.Thread(target=loss.backward); t.start(); t.join()
    opt.step(); opt.zero_grad(set_to_none=True)

for _ in range(5):
    step()
times = []
for _ in range(steps):
    t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
from torchfix_core import status
print(json.dumps({"median_ms": statistics.median(times) * 1e3, "applied": [r.id for r in status() if r.state == "applied"]}))
"""


def run(env_extra: dict[str, str], steps: int) -> dict:
    from torchfix_core.testing import clean_environ

    env = clean_environ()
    env.update(env_extra)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(steps)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    on, off, applied = [], [], []
    for i in range(args.rounds):
        order = [("on", {}), ("off", {"TORCHFIX_DISABLE": "all"})]
        if i % 2:
            order.reverse()
        for name, env in order:
            result = run(env, args.steps)
            (on if name == "on" else off).append(result["median_ms"])
            if name == "on":
                applied = result["applied"]
        print(f"round {i + 1}: on {on[-1]:.3f} ms/step, off {off[-1]:.3f} ms/step")
    ratio = statistics.median(on) / statistics.median(off)
    print(f"fixes applied in the 'on' runs: {applied}")
    print(
        f"steady-state step, median of {args.rounds} process medians ({args.steps} steps each): "
        f"on {statistics.median(on):.3f} ms, off {statistics.median(off):.3f} ms, ratio {ratio:.4f} (goal <= 1.01)"
    )


if __name__ == "__main__":
    main()
