"""Peak CUDA memory and time of the first (cold) SAC training step vs warm steps, with and without
torchfix-autotune.

    python benchmarks/autotune_cold_step.py [--steps 5] [--layers 8] [--tokens 8192] [--dim 4096]
                                            [--policy save-mm|save-all] [--variants fix,no-fix,no-sac]

The model is ``--layers`` compiled blocks (``mm -> sin -> cos * softmax + x``), each under
selective activation checkpointing (``use_reentrant=False``). Nothing is compiled before step 0.
The cold step (step 0) therefore compiles and autotunes its Triton kernels (coordinate-descent
tuning on) inside SAC's *recording* mode in the forward, and, because a guarded flag flips between
its forward and backward and Inductor's in-memory kernel cache is cleared (as the GPU test does; the
stand-in for any reason a recompute recompiles), its recompute recompiles and autotunes fresh
kernels inside SAC's *replay* mode: the situation of the bug. Steps 1.. are warm (the flag stays
flipped, so forward and recompute share the recompiled graph).

Variants, each in a fresh process with its own Inductor cache directory:

* ``fix``: torchfix as installed;
* ``no-fix``: ``TORCHFIX_DISABLE=autotune``; on torch >= 2.13 step 0's backward fails, later steps
  are still run (their kernels are warm by then) so warm figures exist for comparison;
* ``no-sac``: the same compiled blocks without checkpointing: the memory that cold autotuning
  itself needs (flush buffer, argument clones), which no fix can or should remove.

Per step: peak allocated memory above the step's start (``max_memory_allocated`` after
``reset_peak_memory_stats``), memory held after the forward (SAC storage retained until backward),
wall time (synchronised), autotuner calls seen by the fix's wrappers and coordinate-descent
benchmarks counted by Inductor during backward (proof that autotuning ran in the recompute).
Goal (issue #3): with the fix, the cold step's peak within 5 % of the warm steps' median.
Needs CUDA + Triton; without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

MiB = 1024 * 1024
VARIANTS = ("fix", "no-fix", "no-sac")


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch._inductor.runtime.triton_heuristics  # noqa: F401 - the fix's trigger
    from torch._dynamo.utils import counters
    from torch._inductor.utils import clear_caches
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    def policy(ctx: Any, op: Any, *a: Any, **k: Any) -> CheckpointPolicy:
        if args.policy == "save-all":
            # Every op except mutating ones (saving an out=/in-place result trips SAC's mutation check).
            schema = getattr(op, "_schema", None)
            mutable = schema is not None and schema.is_mutable
            return CheckpointPolicy.PREFER_RECOMPUTE if mutable else CheckpointPolicy.MUST_SAVE
        if op is torch.ops.aten.mm.default:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    sac = functools.partial(create_selective_checkpoint_contexts, policy)
    flag = {"recompute_branch": False}

    def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.mm(x, w)
        return h.sin().cos() * torch.softmax(h, dim=-1) + x

    def block_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if flag["recompute_branch"]:  # same math; only the guard differs
            return math(x, w)
        return math(x, w)

    block = torch.compile(block_fn)
    device = args.device
    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def allocated() -> int:  # CPU (--device cpu, a plumbing check) has no allocator statistics: 0
        return torch.cuda.memory_allocated() if cuda else 0

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    torch.manual_seed(0)
    ws = [
        (torch.randn(args.dim, args.dim, device=device, dtype=dtype) / args.dim**0.5).requires_grad_()
        for _ in range(args.layers)
    ]
    x0 = torch.randn(args.tokens, args.dim, device=device, dtype=dtype)
    use_sac = args.variant != "no-sac"

    stats: Any = None
    try:
        from torchfix_autotune.patch import STATS, reset_stats

        stats = STATS
    except ImportError:
        reset_stats = None  # type: ignore[assignment]

    steps: list[dict[str, Any]] = []
    for step in range(args.steps):
        for w in ws:
            w.grad = None
        if reset_stats is not None:
            reset_stats()
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        base = allocated()
        t0 = time.perf_counter()
        row: dict[str, Any] = {"step": step}
        coordesc_before = counters["inductor"]["coordesc_tuning_bench"]
        frames_before = frames_at_start = counters["frames"]["ok"]
        try:
            h = x0
            for w in ws:
                h = checkpoint(block, h, w, use_reentrant=False, context_fn=sac) if use_sac else block(h, w)
            loss = h.float().pow(2).mean()
            sync()
            row["held_after_forward_mib"] = (allocated() - base) / MiB
            row["frames_compiled_in_forward"] = counters["frames"]["ok"] - frames_at_start
            if step == 0 and use_sac:
                flag["recompute_branch"] = True  # recompute misses the guard and recompiles ...
                clear_caches()  # ... and loads its kernels fresh: their autotuners are cold
            frames_before = counters["frames"]["ok"]
            coordesc_before = counters["inductor"]["coordesc_tuning_bench"]
            loss.backward()
            sync()
            row["ok"] = True
        except RuntimeError as exc:
            row["ok"] = False
            row["error"] = str(exc).split(". ")[0][:160]
        row["time_s"] = time.perf_counter() - t0
        row["peak_mib"] = ((torch.cuda.max_memory_allocated() if cuda else 0) - base) / MiB
        row["frames_compiled_in_backward"] = counters["frames"]["ok"] - frames_before
        row["coordesc_bench_in_backward"] = counters["inductor"]["coordesc_tuning_bench"] - coordesc_before
        if stats is not None:
            row["autotuner_calls"] = sum(stats["calls"].values())
            row["calls_with_modes_hidden"] = sum(stats["filtered"].values())
        steps.append(row)
        h = loss = None  # free the step's graph before the next step's baseline
    out: dict[str, Any] = {"torch": torch.__version__, "steps": steps}
    try:
        import torchfix_core

        out["fix_state"] = next((r.state for r in torchfix_core.status() if r.id == "autotune"), "absent")
    except ImportError:
        out["fix_state"] = "torchfix-core not installed"
    return out


def run_variant(name: str, argv: list[str]) -> dict[str, Any]:
    from torchfix_core.testing import clean_environ

    env = clean_environ()
    env.update(
        TORCHINDUCTOR_COORDINATE_DESCENT_TUNING="1",
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
        TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix=f"torchfix-bench-{name}-"),
    )
    if name == "no-fix":
        env["TORCHFIX_DISABLE"] = "autotune"
    cmd = [sys.executable, __file__, "--worker", "--variant", name, *argv]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": f"worker exited {proc.returncode}: {proc.stderr[-2000:]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def summarise(result: dict[str, Any]) -> dict[str, Any] | None:
    """Cold (step 0) against the median of the warm steps: completed, nothing compiled in them."""
    steps = result.get("steps") or []
    warm = [
        r
        for r in steps[1:]
        if r["ok"] and r.get("frames_compiled_in_forward", 1) == 0 and r["frames_compiled_in_backward"] == 0
    ]
    if not steps or not warm:
        return None
    cold = steps[0]
    warm_peak = statistics.median(r["peak_mib"] for r in warm)
    warm_time = statistics.median(r["time_s"] for r in warm)
    return {
        "cold_ok": cold["ok"],
        "cold_peak_mib": cold["peak_mib"],
        "warm_peak_mib": warm_peak,
        "peak_ratio": cold["peak_mib"] / warm_peak if warm_peak else float("nan"),
        "cold_time_s": cold["time_s"],
        "warm_time_s": warm_time,
    }


def report(name: str, result: dict[str, Any]) -> None:
    print(f"\n== {name}: torch {result.get('torch')}, torchfix-autotune state: {result.get('fix_state')}")
    if "error" in result:
        print("   ", result["error"])
        return
    print(
        f"   {'step':>4} {'ok':>3} {'time s':>8} {'peak MiB':>10} {'held fwd MiB':>13} "
        f"{'fw/bw frames':>12} {'bw coordesc':>11} {'tuner calls (hidden)':>21}"
    )
    for row in result["steps"]:
        held = row.get("held_after_forward_mib")
        held_s = f"{held:13.1f}" if held is not None else f"{'-':>13}"
        frames = f"{row.get('frames_compiled_in_forward', '-')}/{row['frames_compiled_in_backward']}"
        calls = f"{row['autotuner_calls']} ({row['calls_with_modes_hidden']})" if "autotuner_calls" in row else "-"
        print(
            f"   {row['step']:>4} {'yes' if row['ok'] else 'NO':>3} {row['time_s']:8.3f} {row['peak_mib']:10.1f} "
            f"{held_s} {frames:>12} {row['coordesc_bench_in_backward']:>11} {calls:>21}"
        )
        if not row["ok"]:
            print(f"        error: {row['error']}")
    summary = summarise(result)
    if summary is None:
        print("   no warm step (completed, nothing compiled): no cold/warm comparison")
        return
    verdict = "within 5%" if summary["peak_ratio"] <= 1.05 else "ABOVE 5%"
    cold_note = "" if summary["cold_ok"] else " (cold step FAILED; its peak is up to the failure)"
    print(
        f"   cold/warm peak: {summary['cold_peak_mib']:.1f} / {summary['warm_peak_mib']:.1f} MiB = "
        f"{summary['peak_ratio']:.3f} ({verdict}){cold_note}; cold-warm: "
        f"{summary['cold_peak_mib'] - summary['warm_peak_mib']:+.1f} MiB"
    )
    print(
        f"   cold/warm time: {summary['cold_time_s']:.2f} / {summary['warm_time_s']:.4f} s "
        "(cold includes compilation and autotuning)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=4096)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--policy", choices=("save-mm", "save-all"), default="save-mm")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: plumbing check, no figures")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing measured")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available: nothing measured (this benchmark needs a GPU with Triton)")
        return 0
    argv = [a for a in sys.argv[1:] if a != "--worker"]
    if "--variants" in argv:  # the parent's selection is not the child's business
        i = argv.index("--variants")
        del argv[i : i + 2]
    argv = [a for a in argv if not a.startswith("--variants=")]
    where = torch.cuda.get_device_name() if args.device == "cuda" else "cpu (plumbing only: no Triton, no figures)"
    print(
        f"autotune_cold_step: {args.layers} compiled blocks, SAC policy {args.policy}, "
        f"x[{args.tokens}, {args.dim}] {args.dtype}, {args.steps} steps; device: {where}"
    )
    for name in variants:
        report(name, run_variant(name, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
