"""Peak CUDA memory and time of the first (cold) SAC training step vs a warm step, with and without
torchfix-autotune.

    python benchmarks/autotune_cold_step.py [--steps 6] [--policy save-mm|save-all] [--layers 4]

Each variant runs in a fresh process (``fix``: torchfix as installed; ``no-fix``:
``TORCHFIX_DISABLE=autotune``). The model is ``--layers`` compiled blocks (mm + pointwise +
softmax), each under selective activation checkpointing (``use_reentrant=False``, SAC policy:
``save-mm`` saves only ``aten.mm``; ``save-all`` saves every non-mutating op, the worst case for
what SAC keeps from a cold autotuner: its L2-flush ``empty`` and argument clones). Nothing is
compiled before step 0, so step 0 compiles and autotunes every Triton kernel (coordinate-descent tuning on) *inside* SAC's recording mode; steps 1.. are warm.

Per step it records: peak allocated memory above the step's starting point
(``max_memory_allocated`` after ``reset_peak_memory_stats``), memory still held after the forward
(what SAC's storage retains until backward), and wall time (synchronised). Goal with the fix: the
cold step's peak within 5 % of the warm step's. Needs CUDA + Triton; without CUDA it says so and
exits 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

MiB = 1024 * 1024


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch._inductor.runtime.triton_heuristics  # noqa: F401 - the fix's trigger
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

    def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.mm(x, w)
        return h.sin().cos() * torch.softmax(h, dim=-1) + x

    blocks = [torch.compile(math) for _ in range(args.layers)]
    torch.manual_seed(0)
    ws = [(torch.randn(args.dim, args.dim, device="cuda") / args.dim**0.5).requires_grad_() for _ in blocks]
    x0 = torch.randn(args.tokens, args.dim, device="cuda")

    stats: Any = None
    try:
        from torchfix_autotune.patch import STATS, reset_stats

        reset_stats()
        stats = STATS
    except ImportError:
        pass

    steps: list[dict[str, Any]] = []
    for step in range(args.steps):
        for w in ws:
            w.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        row: dict[str, Any] = {"step": step}
        try:
            h = x0
            for block, w in zip(blocks, ws):
                h = checkpoint(block, h, w, use_reentrant=False, context_fn=sac)
            loss = h.float().pow(2).mean()
            torch.cuda.synchronize()
            row["held_after_forward_mib"] = (torch.cuda.memory_allocated() - base) / MiB
            loss.backward()
            torch.cuda.synchronize()
            row["ok"] = True
        except RuntimeError as exc:
            row["ok"] = False
            row["error"] = str(exc).split(". ")[0][:160]
        row["time_s"] = time.perf_counter() - t0
        row["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / MiB
        steps.append(row)
        if not row["ok"]:
            break
    out: dict[str, Any] = {"torch": torch.__version__, "steps": steps}
    try:
        import torchfix_core

        out["fix_state"] = next((r.state for r in torchfix_core.status() if r.id == "autotune"), "absent")
    except ImportError:
        out["fix_state"] = "torchfix-core not installed"
    if stats is not None:
        out["wrapped_calls"] = dict(stats["calls"])
        out["filtered_calls"] = dict(stats["filtered"])
    return out


def run_variant(name: str, argv: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update(
        TORCHINDUCTOR_COORDINATE_DESCENT_TUNING="1",
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
        TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix=f"torchfix-bench-{name}-"),
    )
    if name == "no-fix":
        env["TORCHFIX_DISABLE"] = "autotune"
    proc = subprocess.run([sys.executable, __file__, "--worker", *argv], env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": f"worker exited {proc.returncode}: {proc.stderr[-2000:]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def report(name: str, result: dict[str, Any]) -> None:
    print(f"\n== {name}: torch {result.get('torch')}, torchfix-autotune state: {result.get('fix_state')}")
    if "error" in result:
        print("   ", result["error"])
        return
    print(f"   {'step':>4} {'ok':>3} {'time s':>8} {'peak MiB':>10} {'held after fwd MiB':>19}")
    for row in result["steps"]:
        held = row.get("held_after_forward_mib")
        held_s = f"{held:19.1f}" if held is not None else f"{'-':>19}"
        print(
            f"   {row['step']:>4} {'yes' if row['ok'] else 'NO':>3} {row['time_s']:8.3f} {row['peak_mib']:10.1f} {held_s}"
        )
        if not row["ok"]:
            print(f"        error: {row['error']}")
    steps = result["steps"]
    warm = [r for r in steps[1:] if r["ok"]]
    if steps and steps[0]["ok"] and warm:
        cold = steps[0]
        warm_peak = statistics.median(r["peak_mib"] for r in warm)
        warm_time = statistics.median(r["time_s"] for r in warm)
        ratio = cold["peak_mib"] / warm_peak if warm_peak else float("nan")
        verdict = "within 5%" if ratio <= 1.05 else "ABOVE 5%"
        print(
            f"   cold/warm peak: {cold['peak_mib']:.1f} / {warm_peak:.1f} MiB = {ratio:.3f} ({verdict}); "
            f"cold/warm time: {cold['time_s']:.2f} / {warm_time:.4f} s (cold includes compilation)"
        )
    if "wrapped_calls" in result:
        print(f"   wrapped autotuner calls: {result['wrapped_calls']}; with modes hidden: {result['filtered_calls']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--policy", choices=("save-mm", "save-all"), default="save-mm")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("CUDA is not available: nothing measured (this benchmark needs a GPU with Triton)")
        return 0
    argv = [a for a in sys.argv[1:] if a != "--worker"]
    print(
        f"autotune_cold_step: {args.layers} compiled blocks under SAC ({args.policy}), x[{args.tokens}, {args.dim}], "
        f"{args.steps} steps; GPU: {torch.cuda.get_device_name()}"
    )
    for name in ("fix", "no-fix"):
        report(name, run_variant(name, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
