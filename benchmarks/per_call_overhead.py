"""Per-call cost of each torchfix wrapper that sits on a path a training step may take.

    python benchmarks/per_call_overhead.py [--number 2000] [--repeat 101]

Goal (issue 14): each wrapper that runs per step adds <= 1 us per call, or is shown not to run per
step. Each figure is the minimum over ``--repeat`` interleaved repetitions of ``--number`` calls,
with the fix applied and reverted through ``torchfix_core`` (or, for a wrapper that cannot be
reached on this machine, the wrapper factory applied to a stand-in function: said so in the row).

* autotune: the mode filter around ``CachingAutotuner.bench`` / ``autotune_to_one_config`` /
  ``coordinate_descent_tuning`` with no dispatch mode active, measured on a stand-in function (no
  Triton on a CPU machine). Not per step: ``CachingAutotuner.run`` takes its cached-launcher fast
  path once a kernel is tuned; the three methods run at a kernel's first launches only.
* aot-fallback: ``AOTCompiledFunction.__call__`` of a real artifact
  (``torch.compile(f, fullgraph=True, backend="eager").aot_compile(...)``): per call of the artifact.
* placement-cache: ``DTensor._stable_hash_for_caching`` of a real DTensor (a one-rank gloo mesh).
  Not per step: only the AOTAutograd cache pickler calls it, when a graph's cache key is computed
  (compile time).
* fp8-recompute: ``activation_recompute_forward`` enter + exit and ``is_fp8_activation_recompute_enabled()``
  of a real TransformerEngine (skipped when TE is not importable): per checkpoint region entry and
  per TE module call.
* sac-replay: see ``benchmarks/recompute_overhead.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import timeit
from typing import Any, Callable

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (the aot-fallback trigger, torch._dynamo.aot_compile)
import torchfix_core  # noqa: E402
from _timing import timing_arguments  # noqa: E402

Row = tuple[str, str, float, float, str]


def state(fix_id: str) -> str:
    return next((str(getattr(r.state, "value", r.state)) for r in torchfix_core.status() if r.id == fix_id), "absent")


def with_and_without(fix_id: str, call: Callable[[], Any], number: int, repeat: int) -> tuple[float, float]:
    """(ns per call applied, ns per call reverted): interleaved repetitions, minimum of each."""
    on: list[float] = []
    off: list[float] = []
    for _ in range(repeat):
        torchfix_core.apply(only=[fix_id])
        on.append(timeit.timeit(call, number=number))
        torchfix_core.revert(only=[fix_id])
        off.append(timeit.timeit(call, number=number))
    torchfix_core.apply(only=[fix_id])
    return min(on) / number * 1e9, min(off) / number * 1e9


def paired(a: Callable[[], Any], b: Callable[[], Any], number: int, repeat: int) -> tuple[float, float]:
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(repeat):
        ta.append(timeit.timeit(a, number=number))
        tb.append(timeit.timeit(b, number=number))
    return min(ta) / number * 1e9, min(tb) / number * 1e9


def autotune(number: int, repeat: int) -> Row:
    try:
        from torchfix_autotune.patch import filtered
    except ImportError as exc:
        return ("autotune mode filter", "no", float("nan"), float("nan"), f"not installed ({exc})")

    def bench(*args: Any, **kwargs: Any) -> None:
        return None

    wrapped = filtered(bench)
    on, off = paired(lambda: wrapped(1, 2), lambda: bench(1, 2), number, repeat)
    return ("autotune mode filter, no mode active", "no (first launches only)", on, off, "stand-in function")


def aot_fallback(number: int, repeat: int) -> Row:
    name = "aot-fallback AOTCompiledFunction.__call__"
    if state("aot-fallback") in ("absent", "not-installed"):
        return (name, "yes, per call of the artifact", float("nan"), float("nan"), "not installed")
    if state("aot-fallback") != "applied":
        torchfix_core.apply(only=["aot-fallback"])
    if state("aot-fallback") != "applied":
        return (name, "per call", float("nan"), float("nan"), f"fix {state('aot-fallback')} here")
    torch._dynamo.config.enable_aot_compile = True

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sin() + 1

    x = torch.randn(8)
    artifact = torch.compile(f, fullgraph=True, backend="eager").aot_compile(((x,), {}))
    on, off = with_and_without("aot-fallback", lambda: artifact(x), number, repeat)
    return (name, "yes, per call of the artifact", on, off, "real artifact, backend eager, guards checked")


def placement_cache(number: int, repeat: int) -> Row:
    name = "placement-cache DTensor._stable_hash_for_caching"
    if state("placement-cache") in ("absent", "not-installed"):
        return (name, "no (cache key, compile time)", float("nan"), float("nan"), "not installed")
    import torch.distributed as dist

    if not dist.is_available():
        return (name, "no (cache key, compile time)", float("nan"), float("nan"), "torch.distributed unavailable")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    with tempfile.TemporaryDirectory() as tmp:
        if not dist.is_initialized():
            dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            mesh = init_device_mesh("cpu", (1,))
            dt = distribute_tensor(torch.randn(10, 8), mesh, [Shard(0)])
            torchfix_core.apply(only=["placement-cache"])
            if state("placement-cache") != "applied":
                return (
                    name,
                    "no (cache key, compile time)",
                    float("nan"),
                    float("nan"),
                    f"fix {state('placement-cache')}",
                )
            on, off = with_and_without("placement-cache", dt._stable_hash_for_caching, number, repeat)
        finally:
            dist.destroy_process_group()
    return (name, "no (AOTAutograd cache key: compile time)", on, off, "real DTensor, 1-rank gloo mesh")


def fp8_recompute(number: int, repeat: int) -> list[Row]:
    try:
        import transformer_engine.pytorch.distributed as te_dist
    except Exception as exc:  # noqa: BLE001 - TE absent or unusable here
        return [
            (
                "fp8-recompute region entry",
                "yes",
                float("nan"),
                float("nan"),
                f"TE not importable ({type(exc).__name__})",
            )
        ]
    if state("fp8-recompute") in ("absent", "not-installed"):
        return [("fp8-recompute region entry", "yes", float("nan"), float("nan"), "not installed")]
    torchfix_core.apply(only=["fp8-recompute"])
    if state("fp8-recompute") != "applied":
        return [("fp8-recompute region entry", "yes", float("nan"), float("nan"), f"fix {state('fp8-recompute')}")]
    region = te_dist.activation_recompute_forward

    def enter_exit() -> None:
        ctx = region(activation_recompute=True, recompute_phase=False)
        ctx.__enter__()
        ctx.__exit__(None, None, None)

    getter = te_dist.is_fp8_activation_recompute_enabled
    on, off = with_and_without("fp8-recompute", enter_exit, number, repeat)
    g_on, g_off = with_and_without("fp8-recompute", getter, number, repeat)

    def getter_in_region() -> None:
        ctx = region(activation_recompute=True, recompute_phase=False)
        ctx.__enter__()
        try:
            for _ in range(number):
                getter()
        finally:
            ctx.__exit__(None, None, None)

    r_on, r_off = with_and_without("fp8-recompute", getter_in_region, 1, repeat)
    version = getattr(sys.modules.get("transformer_engine"), "__version__", "?")
    return [
        (
            "fp8-recompute activation_recompute_forward enter+exit",
            "yes, per checkpoint region entry",
            on,
            off,
            f"TE {version}",
        ),
        (
            "fp8-recompute is_fp8_activation_recompute_enabled(), outside a region",
            "yes, per TE module call",
            g_on,
            g_off,
            f"TE {version}",
        ),
        (
            "fp8-recompute is_fp8_activation_recompute_enabled(), inside a region",
            "yes, per TE module call",
            r_on / number,
            r_off / number,
            f"TE {version}, FP8 off (the region flag is True with the fix, so the FP8 state is read)",
        ),
    ]


def main() -> None:
    args = timing_arguments(__doc__, number=2000, repeat=101)
    try:
        load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        load = "n/a"
    print(f"per_call_overhead: torch {torch.__version__}, Python {sys.version.split()[0]}, load average {load}")
    rows: list[Row] = [autotune(args.number, args.repeat)]
    for measure in (aot_fallback, placement_cache):
        try:
            rows.append(measure(args.number, args.repeat))
        except Exception as exc:  # noqa: BLE001 - one failing measurement must not hide the others
            rows.append((measure.__name__, "?", float("nan"), float("nan"), f"failed: {type(exc).__name__}: {exc}"))
    rows.extend(fp8_recompute(args.number, args.repeat))
    print("| wrapper | runs per step | us with | us without | us added | note |")
    print("|---|---|---|---|---|---|")
    for name, per_step, on, off, note in rows:
        print(f"| {name} | {per_step} | {on / 1e3:.3f} | {off / 1e3:.3f} | {(on - off) / 1e3:+.3f} | {note} |")


if __name__ == "__main__":
    main()
