"""A training step in the prime-rl pattern, with torchfix vs ``TORCHFIX_DISABLE=all``.

    python benchmarks/prime_rl_step.py [--device cpu|cuda] [--rounds 8] [--steps 30] [--layers 4]
                                       [--dim 128] [--seq 64] [--batch 2] [--micro 2]
                                       [--scenario steady|guard-miss|both]

The pattern (prime-rl's trainer, and most FSDP + SAC recipes): N transformer blocks (LayerNorm,
causal self-attention, LayerNorm, MLP; residuals), each compiled on its own
(``torch.compile(block, dynamic=False)``) and called through an eager
``checkpoint(compiled_block, h, use_reentrant=False, context_fn=sac)`` with a selective policy (save
the matmuls, recompute the rest); ``--micro`` micro-batches of gradient accumulation, each with its
backward on the autograd worker thread (CUDA: a plain ``backward()``, the engine's device thread runs
the recompute; CPU: a persistent ``threading.Thread``, the stand-in for it); then an AdamW step.
So one checkpoint frame and one recompute per layer per micro-batch: the per-checkpoint cost of the
fix is paid ``layers x micro`` times per step. The training thread raises ``recompile_limit`` to 64,
as prime-rl does (per thread on torch 2.12+).

Scenarios:

* ``steady`` (the step time): fixed shapes; after the warm-up (compiles) ``--steps`` steps are timed.
  Each configuration runs in its own process (the Inductor caches on disk make the later processes
  cheap); ``on`` (torchfix as installed) and ``off`` (``TORCHFIX_DISABLE=all``) alternate for
  ``--rounds`` rounds. Printed: per-run median step time and peak memory, the ratio of the medians
  over runs, and the per-round ratios (median, min, max: the noise). Then, in one process, the same
  steps alternate in blocks between every fix applied and every fix reverted
  (``torchfix_core.apply()`` / ``revert()``): the same compiled code and memory layout on both sides,
  so that ratio has far less noise than the process-level one.
* ``guard-miss`` (does it train): each step uses the next of ``--buckets`` sequence lengths, and a
  module flag read by the compiled block flips between forward and backward, so the recompute misses
  the forward's Dynamo cache entry and compiles its own (an emulation of a guarded attribute that
  changes between forward and backward, such as a wrapper's training-state flag). Once the block's
  code object holds 8 entries, a recompute that reads the default ``recompile_limit`` (8) instead of
  the forward's 64 runs the block eagerly and SAC's replay fails. Printed: steps completed and the
  error, with and without torchfix.

Peak memory: CUDA ``torch.cuda.max_memory_allocated()`` over the timed steps; CPU the process's peak
resident set size (``ru_maxrss``, compile included).

On one CUDA GPU (torch 2.13 CUDA, torchfix installed from wheels with ``pip install --no-index
--no-deps --target SITE``, no network needed; each command stays under 10 minutes on an H200)::

    PYTHONPATH=SITE TORCHINDUCTOR_COMPILE_THREADS=16 python3 benchmarks/prime_rl_step.py --device cuda \
        --scenario steady --rounds 4 --steps 50 --layers 8 --dim 1024 --seq 1024 --batch 4 --block-steps 10
    PYTHONPATH=SITE TORCHINDUCTOR_COMPILE_THREADS=16 python3 benchmarks/prime_rl_step.py --device cuda \
        --scenario guard-miss --layers 2 --dim 1024 --batch 4 --buckets 6 --guard-steps 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

BUCKETS = (32, 48, 64, 80, 96, 112, 128, 144)


def build(args: argparse.Namespace) -> dict[str, Any]:
    import functools
    import queue
    import threading

    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    torch.manual_seed(0)
    if args.device == "cpu":
        torch.set_num_threads(1)
    torch._dynamo.config.recompile_limit = 64  # the training thread's setting, as prime-rl raises it
    dev = torch.device(args.device)
    d, heads = args.dim, max(1, args.dim // 64)
    state = {"phase": 0}

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(d)
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.proj = torch.nn.Linear(d, d)
            self.ln2 = torch.nn.LayerNorm(d)
            self.fc1 = torch.nn.Linear(d, 4 * d)
            self.fc2 = torch.nn.Linear(4 * d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            scale = 1.0 if state["phase"] == 0 else 1.0  # same math; a guard on the flag
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)))) * scale

    blocks = torch.nn.ModuleList(Block() for _ in range(args.layers)).to(dev)
    compiled = [torch.compile(b, dynamic=False) for b in blocks]
    opt = torch.optim.AdamW(blocks.parameters(), lr=1e-4)
    save = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}

    def policy(ctx: Any, op: Any, *a: Any, **k: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE

    sac = functools.partial(create_selective_checkpoint_contexts, policy)
    jobs: queue.Queue[Any] = queue.Queue()
    done: queue.Queue[BaseException | None] = queue.Queue()

    def loop() -> None:
        while (job := jobs.get()) is not None:
            try:
                job()
                done.put(None)
            except BaseException as exc:  # noqa: BLE001
                done.put(exc)

    worker = threading.Thread(target=loop, name="backward-worker", daemon=True)
    worker.start()

    def backward(loss: torch.Tensor) -> None:
        if dev.type == "cuda":
            loss.backward()  # the engine's device thread runs the recompute
            return
        jobs.put(loss.backward)
        exc = done.get()
        if exc is not None:
            raise exc

    def step(seq: int, flip: bool) -> None:
        g = torch.Generator(device="cpu").manual_seed(seq)
        for _ in range(args.micro):
            h = torch.randn(args.batch, seq, d, generator=g).to(dev)
            for blk in compiled:
                h = checkpoint(blk, h, use_reentrant=False, context_fn=sac)
            loss = h.float().square().mean() / args.micro
            if flip:
                state["phase"] = 1
            try:
                backward(loss)
            finally:
                state["phase"] = 0
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    return {"step": step, "sync": sync, "torch": torch}


def peak_mib(torch: Any, device: str) -> float:
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def applied_fixes() -> list[str]:
    import torchfix_core

    return [r.id for r in torchfix_core.status() if r.state == "applied"]


def timed_steps(step: Any, sync: Any, seq: int, n: int) -> list[float]:
    """Seconds of each of ``n`` fixed-shape steps at sequence length ``seq``, the device's work
    included (``sync()`` before the clock stops)."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step(seq, False)
        sync()
        times.append(time.perf_counter() - t)
    return times


def child_steady(args: argparse.Namespace) -> dict[str, Any]:
    env = build(args)
    step, sync, torch = env["step"], env["sync"], env["torch"]
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        step(args.seq, False)
    sync()
    warm = time.perf_counter() - t0
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = timed_steps(step, sync, args.seq, args.steps)
    out = {
        "median_ms": statistics.median(times) * 1e3,
        "warmup_s": warm,
        "peak_mib": peak_mib(torch, args.device),
        "applied": applied_fixes(),
        "torch": torch.__version__,
    }
    if args.in_process_blocks:
        out["in_process"] = in_process(args, step, sync)
    return out


def in_process(args: argparse.Namespace, step: Any, sync: Any) -> dict[str, Any]:
    """Blocks of steps alternating between every fix applied and every fix reverted, one process."""
    import torchfix_core

    samples: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(args.in_process_blocks):
        order = ("on", "off") if i % 2 == 0 else ("off", "on")
        for key in order:
            (torchfix_core.apply if key == "on" else torchfix_core.revert)()
            samples[key].append(statistics.median(timed_steps(step, sync, args.seq, args.block_steps)) * 1e3)
    torchfix_core.apply()
    ratios = [a / b for a, b in zip(samples["on"], samples["off"])]
    return {
        "on_ms": statistics.median(samples["on"]),
        "off_ms": statistics.median(samples["off"]),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "blocks": args.in_process_blocks,
    }


def child_guard_miss(args: argparse.Namespace) -> dict[str, Any]:
    env = build(args)
    step, sync, torch = env["step"], env["sync"], env["torch"]
    buckets = BUCKETS[: args.buckets]
    done = 0
    error = None
    t0 = time.perf_counter()
    for i in range(args.guard_steps):
        try:
            step(buckets[i % len(buckets)], True)
            sync()
        except Exception as exc:  # noqa: BLE001 - reported, that is the point
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            break
        done += 1
    return {
        "steps_done": done,
        "steps": args.guard_steps,
        "error": error,
        "total_s": time.perf_counter() - t0,
        "peak_mib": peak_mib(torch, args.device),
        "applied": applied_fixes(),
        "torch": torch.__version__,
    }


def run_child(args: argparse.Namespace, scenario: str, on: bool, in_process_blocks: int = 0) -> dict[str, Any]:
    from torchfix_core.testing import clean_environ

    env = clean_environ()
    if not on:
        env["TORCHFIX_DISABLE"] = "all"
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU run on a GPU machine must not initialise CUDA
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        scenario,
        "--in-process-blocks",
        str(in_process_blocks),
    ]
    for key in ("device", "steps", "warmup", "layers", "dim", "seq", "batch", "micro", "buckets", "guard_steps"):
        cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    cmd += ["--block-steps", str(args.block_steps)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"child {scenario} on={on} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def load() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def steady(args: argparse.Namespace) -> None:
    on: list[dict[str, Any]] = []
    off: list[dict[str, Any]] = []
    for i in range(args.rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        for flag in order:
            r = run_child(args, "steady", flag)
            (on if flag else off).append(r)
            print(
                f"  round {i + 1} {'on ' if flag else 'off'}: {r['median_ms']:.3f} ms/step, peak {r['peak_mib']:.0f} MiB, "
                f"warm-up {r['warmup_s']:.1f} s (load {load()})",
                flush=True,
            )
    med_on = statistics.median(r["median_ms"] for r in on)
    med_off = statistics.median(r["median_ms"] for r in off)
    ratios = [a["median_ms"] / b["median_ms"] for a, b in zip(on, off)]
    print(f"torch {on[0]['torch']}, device {args.device}; fixes applied in the 'on' runs: {on[0]['applied']}")
    print(
        f"steady step, {args.layers} layers x {args.micro} micro-batches = {args.layers * args.micro} checkpoints "
        f"per step, median of {args.rounds} process medians ({args.steps} steps each): on {med_on:.3f} ms, "
        f"off {med_off:.3f} ms, ratio {med_on / med_off:.4f}; per-round ratios median {statistics.median(ratios):.4f}, "
        f"min {min(ratios):.4f}, max {max(ratios):.4f} (goal <= 1.005)"
    )
    print(
        f"peak memory, median: on {statistics.median(r['peak_mib'] for r in on):.1f} MiB, "
        f"off {statistics.median(r['peak_mib'] for r in off):.1f} MiB"
    )
    if args.in_process_blocks:
        r = run_child(args, "steady", True, args.in_process_blocks)["in_process"]
        print(
            f"in one process, {r['blocks']} blocks x {args.block_steps} steps alternating apply()/revert(): "
            f"on {r['on_ms']:.3f} ms, off {r['off_ms']:.3f} ms, block ratios median {r['ratio_median']:.4f}, "
            f"min {r['ratio_min']:.4f}, max {r['ratio_max']:.4f}"
        )


def guard_miss(args: argparse.Namespace) -> None:
    for flag in (False, True):
        r = run_child(args, "guard-miss", flag)
        result = "completed" if r["error"] is None else f"failed at step {r['steps_done'] + 1}: {r['error']}"
        print(
            f"guard-miss, torch {r['torch']}, {'torchfix' if flag else 'TORCHFIX_DISABLE=all'}: "
            f"{r['steps_done']}/{r['steps']} steps, {result} ({r['total_s']:.0f} s, peak {r['peak_mib']:.0f} MiB, "
            f"applied: {r['applied']})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--scenario", default="both", choices=("steady", "guard-miss", "both"))
    parser.add_argument("--rounds", type=int, default=8, help="on/off process pairs (steady)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per process (steady)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--micro", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--buckets", type=int, default=6, help="sequence lengths cycled (guard-miss)")
    parser.add_argument("--guard-steps", type=int, default=8, help="steps (guard-miss)")
    parser.add_argument("--in-process-blocks", type=int, default=20, help="0: skip the one-process comparison")
    parser.add_argument("--block-steps", type=int, default=5)
    parser.add_argument("--child", choices=("steady", "guard-miss"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        result = child_steady(args) if args.child == "steady" else child_guard_miss(args)
        print(json.dumps(result))
        return
    print(
        f"prime_rl_step: device {args.device}, {args.layers} blocks of dim {args.dim}, batch {args.batch}, "
        f"seq {args.seq}, {args.micro} micro-batches, SAC (save mm/addmm/bmm), backward on the worker thread; "
        f"{os.cpu_count()} CPUs, load average {load()} at start",
        flush=True,
    )
    if args.scenario in ("steady", "both"):
        steady(args)
    if args.scenario in ("guard-miss", "both"):
        guard_miss(args)
    print(f"load average {load()} at the end")


if __name__ == "__main__":
    main()
