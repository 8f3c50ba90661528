"""Cost of the two ways to combine torch.compile with (selective) activation checkpointing.

    python benchmarks/sac_replay_layouts.py [--device auto|cpu|cuda] [--steps 30] [--width 256]

Layouts, each in a fresh interpreter (own Dynamo cache), all on the same transformer MLP block
(LayerNorm, Linear d->4d, GELU, Linear 4d->d, residual), SAC policy "save mm/addmm outputs":

* ``compile(checkpoint_wrapper(block))``: checkpoint inside the compiled region. Dynamo turns the
  checkpoint into the ``tag_activation_checkpoint`` HOP and the partitioner does the recompute inside
  the compiled backward: nothing dispatches through SAC's modes at run time, so neither the per-thread
  config (this fix) nor autotuning in replay nor an eager replay can break it;
* ``checkpoint_wrapper(compile(block))``: eager checkpoint around compiled code. The recompute re-runs
  the compiled artifact under SAC's modes in the backward (on CUDA: on the autograd worker thread);
  the layout this fix and torchfix-autotune exist for;
* ``compile(block)`` without checkpointing and ``checkpoint_wrapper(block)`` eager, for reference.

Prints, per layout: first step (compile) seconds, median steady step ms, ops the SAC policy saw at
run time per step (forward dispatches through the caching mode; on 2.13+ the recompute replays the
same number through the cached mode, which does not call the policy), and on CUDA the peak memory.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

LAYOUTS = (
    "compile(checkpoint_wrapper(block))",
    "checkpoint_wrapper(compile(block))",
    "compile(block)",
    "checkpoint_wrapper(block)",
)


def child(layout: str, device: str, steps: int, width: int, seq: int) -> dict[str, Any]:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    from _mlp_block import MLPBlock
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    torch.manual_seed(0)
    d = width
    dispatches = {"n": 0}
    save = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}

    def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if not torch.compiler.is_compiling():
            dispatches["n"] += 1
        return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE

    sac = functools.partial(create_selective_checkpoint_contexts, policy)

    block = MLPBlock(d).to(device)
    if layout == LAYOUTS[0]:
        model: Any = torch.compile(checkpoint_wrapper(block, context_fn=sac))
    elif layout == LAYOUTS[1]:
        model = checkpoint_wrapper(torch.compile(block), context_fn=sac)
    elif layout == LAYOUTS[2]:
        model = torch.compile(block)
    else:
        model = checkpoint_wrapper(block, context_fn=sac)
    x = torch.randn(8, seq, d, device=device, requires_grad=True)

    def step() -> None:
        model(x).pow(2).mean().backward()
        if device == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    times = []
    per_step = []
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        dispatches["n"] = 0
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        per_step.append(dispatches["n"])
    return {
        "layout": layout,
        "device": device,
        "torch": torch.__version__,
        "first_step_s": first,
        "median_step_ms": statistics.median(times) * 1e3,
        "sac_runtime_dispatches_per_step": statistics.median(per_step),
        "peak_mem_mb": torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.device, args.steps, args.width, args.seq)))
        return
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for layout in LAYOUTS:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            layout,
            "--device",
            device,
            "--steps",
            str(args.steps),
            "--width",
            str(args.width),
            "--seq",
            str(args.seq),
        ]
        env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            print(f"{layout}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if not rows:
        return
    print()
    print(
        f"sac_replay_layouts: torch {rows[0]['torch']}, device {device}, x (8, {args.seq}, {args.width}), "
        f"{args.steps} timed steps"
    )
    print(f"{'layout':38} {'first step s':>12} {'step ms':>9} {'SAC ops/step (fwd)':>19} {'peak MB':>8}")
    for r in rows:
        mem = f"{r['peak_mem_mb']:.0f}" if r["peak_mem_mb"] is not None else "-"
        print(
            f"{r['layout']:38} {r['first_step_s']:>12.2f} {r['median_step_ms']:>9.2f} "
            f"{r['sac_runtime_dispatches_per_step']:>19} {mem:>8}"
        )


if __name__ == "__main__":
    main()
