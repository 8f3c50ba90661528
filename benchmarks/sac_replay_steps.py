"""Benchmark for torchfix-sac-replay: a compiled, checkpointed transformer MLP block trained for N
steps with varying sequence lengths, counting what happens in the recompute with and without the fix.

    python benchmarks/sac_replay_steps.py [--steps 24] [--device auto|cpu|cuda] [--policy sac,plain]

Each (policy, fix on/off) pair runs in a fresh interpreter (own Dynamo cache). The parent prints a
table; every child prints one JSON line. Figures per run:

* forward compiles, recompiles during recompute (Dynamo frames compiled while ``backward()`` ran),
  eager fallbacks during recompute (Dynamo recompile-limit hits while ``backward()`` ran);
* whether training reached the last step (under SAC, a fallback is fatal on torch 2.13+);
* median step time over the steps after the first pass through the sequence lengths (steady state:
  every length compiled), and the total wall time;
* the per-recompute overhead of the fix: a tiny eager checkpointed op, forward + backward, many times,
  alternating applied/reverted in one process (``on/off`` microseconds).

Set-up: the block is compiled with ``dynamic=False`` (one graph per sequence-length bucket, 12
buckets) and the training thread raises ``recompile_limit`` to 64 so that every bucket compiles. The
recompute must miss the forward's cache entry for the per-thread config to matter; here a module flag
flipped between forward and backward (as a framework's training-state flag would be) forces that
miss: an emulation of real causes (BRIEF section 3.1), said so in the output. Once the code object
holds 8 entries, a recompute under the default limit (8) falls back to eager. On CPU, ``backward()``
runs on a ``threading.Thread`` (the stand-in for CUDA's autograd worker thread); on CUDA it is a
plain call.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

SEQ_LENS = (16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 112, 128)


def child(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    import torch._dynamo
    import torchfix_core
    from _mlp_block import MLPBlock
    from torch._dynamo.utils import counters
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    fix = next((r.state for r in torchfix_core.status() if r.id == "sac-replay"), "absent")
    dev = args.device
    torch._dynamo.config.recompile_limit = 64
    torch.manual_seed(0)
    d = args.width

    class Block(MLPBlock):
        def __init__(self) -> None:
            super().__init__(d)
            self.training_phase = 0  # flipped between forward and backward (emulated guard miss)

        def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:  # type: ignore[override]
            scale = 1.0 if self.training_phase == 0 else 1.0  # same math either way
            return x + self.mlp(x)[:, :n] * scale

    block = Block().to(dev)
    compiled = torch.compile(block, dynamic=False)
    opt = torch.optim.SGD(block.parameters(), lr=1e-3)
    if args.policy == "sac":
        ops = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]
        kwargs: dict[str, Any] = {"context_fn": functools.partial(create_selective_checkpoint_contexts, ops)}
    else:
        kwargs = {}

    def frames() -> tuple[int, int]:
        unimpl = counters.get("unimplemented") or {}
        hits = sum(v for k, v in unimpl.items() if "recompile limit" in str(k).lower())
        return int((counters.get("frames") or {}).get("total", 0)), int(hits)

    def backward(loss: torch.Tensor) -> None:
        """CUDA: a plain call (the engine's worker thread runs the recompute); CPU: on a fresh thread,
        the stand-in for it (``result()`` raises here what ``backward()`` raised there)."""
        if dev == "cuda":
            loss.backward()
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(loss.backward).result()

    rows: list[dict[str, Any]] = []
    error = None
    t_all = time.perf_counter()
    for step in range(args.steps):
        n = SEQ_LENS[step % len(SEQ_LENS)]
        x = torch.randn(args.batch, n, d, device=dev, requires_grad=True)
        t0 = time.perf_counter()
        f0, _ = frames()
        block.training_phase = 0
        out = checkpoint(compiled, x, n, use_reentrant=False, **kwargs)
        loss = out.float().pow(2).mean()
        f1, h1 = frames()
        block.training_phase = 1
        try:
            backward(loss)
        except RuntimeError as exc:
            error = f"step {step}: {str(exc).splitlines()[0][:160]}"
        else:
            opt.step()
            opt.zero_grad(set_to_none=True)
            if dev == "cuda":
                torch.cuda.synchronize()
        f2, h2 = frames()
        rows.append(
            {
                "step": step,
                "n": n,
                "fwd_compiles": f1 - f0,
                "recompute_compiles": f2 - f1,
                "fallbacks": h2 - h1,
                "s": time.perf_counter() - t0,
            }
        )
        if error is not None:  # the failing step's row is kept; the run stops there
            break
    total = time.perf_counter() - t_all
    tail = [r["s"] for r in rows[len(SEQ_LENS) :]] if error is None else []
    overhead = tiny_overhead(dev, args.overhead_iters, fix)
    return {
        "torch": torch.__version__,
        "device": dev,
        "policy": args.policy,
        "fix": fix,
        "steps_done": len(rows) - (1 if error else 0),
        "steps": args.steps,
        "fwd_compiles": sum(r["fwd_compiles"] for r in rows),
        "recompute_compiles": sum(r["recompute_compiles"] for r in rows),
        "fallbacks": sum(r["fallbacks"] for r in rows),
        "median_step_s_steady": statistics.median(tail) if tail else None,
        "tiny_ckpt_step_us": overhead,
        "total_s": total,
        "error": error,
        "per_step": rows,
    }


def tiny_overhead(dev: str, iters: int, fix: str) -> dict[str, float]:
    """Median microseconds of checkpoint(fn) forward + backward of a tiny eager op (same thread).

    Where the fix is applied, the runs alternate between applied and reverted (torchfix_core API) in
    this process, so both figures see the same machine load: {"on": us, "off": us}.
    """
    import torch
    import torchfix_core
    from torch.utils.checkpoint import checkpoint

    x = torch.randn(16, device=dev, requires_grad=True)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return t.sin()

    def once() -> float:
        t0 = time.perf_counter()
        for _ in range(iters):
            checkpoint(fn, x, use_reentrant=False).sum().backward()
        if dev == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / iters * 1e6

    samples: dict[str, list[float]] = {"on": [], "off": []} if fix == "applied" else {"off": []}
    for _ in range(5):
        for key in samples:
            if fix == "applied":
                (torchfix_core.apply if key == "on" else torchfix_core.revert)(only=["sac-replay"])
            samples[key].append(once())
    if fix == "applied":
        torchfix_core.apply(only=["sac-replay"])
    return {k: statistics.median(v) for k, v in samples.items()}


def parent(args: argparse.Namespace) -> None:
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    results = []
    for policy in args.policy.split(","):
        for fix in (False, True):
            from torchfix_core.testing import clean_environ

            env = clean_environ()
            env.update(
                TORCHFIX_DISABLE="all",
                TORCHFIX_SAC_REPLAY_ENABLED="1" if fix else "0",
                TORCHINDUCTOR_COMPILE_THREADS=env.get("TORCHINDUCTOR_COMPILE_THREADS", "1"),
            )
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "--device",
                device,
                "--policy",
                policy,
                "--steps",
                str(args.steps),
                "--width",
                str(args.width),
                "--batch",
                str(args.batch),
                "--overhead-iters",
                str(args.overhead_iters),
            ]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"child failed ({policy}, fix={fix}):\n{proc.stderr[-3000:]}", file=sys.stderr)
                continue
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(res)
            print(json.dumps({k: v for k, v in res.items() if k != "per_step"}), flush=True)
    if not results:
        return
    print()
    print(
        f"sac_replay_steps: torch {results[0]['torch']}, device {results[0]['device']}, "
        f"{args.steps} steps over seq lens {SEQ_LENS}, width {args.width}, batch {args.batch}, "
        "torch.compile(dynamic=False), recompile_limit=64 on the training thread"
    )
    print("(recompute guard miss emulated by a module flag flipped between forward and backward)")
    head = (
        f"{'policy':7} {'fix':10} {'steps':>7} {'fwd comp':>8} {'recomp comp':>11} {'fallbacks':>9} "
        f"{'steady step s':>13} {'total s':>8} {'tiny ckpt us on/off':>19}  error"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        med = r["median_step_s_steady"]
        t = r["tiny_ckpt_step_us"]
        tiny = (f"{t['on']:.0f}/" if "on" in t else "-/") + f"{t['off']:.0f}"
        print(
            f"{r['policy']:7} {r['fix']:10} {r['steps_done']:>3}/{r['steps']:<3} {r['fwd_compiles']:>8} "
            f"{r['recompute_compiles']:>11} {r['fallbacks']:>9} {f'{med:.4f}' if med else '-':>13} "
            f"{r['total_s']:>8.1f} {tiny:>19}  {r['error'] or ''}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--overhead-iters", type=int, default=300)
    p.add_argument("--device", default="auto")
    p.add_argument("--policy", default="sac,plain", help="comma list of: sac, plain (non-SAC checkpoint)")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
    else:
        parent(args)


if __name__ == "__main__":
    main()
