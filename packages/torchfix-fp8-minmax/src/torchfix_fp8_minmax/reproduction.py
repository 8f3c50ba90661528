"""fp8-minmax-store's reproduction (``FixSpec.reproduction``: :func:`fp8_minmax_store`), and the sweep
behind it (:func:`sweep`), which the package's GPU test and its demo run too.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's GPU what the package's GPU
test runs; imported only when a reproduction runs (it imports torch inside its functions).

The case (triton-lang/triton#11111): the dynamic-scaling float8 cast of float8 training, compiled by
Inductor (``amax = g.abs().amax()``, ``scale = max / amax.clamp(min=1e-12)``,
``y = (g.float() * scale).clamp(-max, max).to(fp8)``, returning ``y`` and ``y.t().contiguous()``),
on bf16 inputs (``randn * 3``, seed 0, one element set to 1000) of :data:`SHAPES`, in e4m3fn and
e5m2, with ``max_autotune_pointwise`` on. Triton 3.8 mis-lowers Inductor's
``tl.minimum/maximum(..., tl.PropagateNan.ALL)`` next to the transposed 1-byte store for some launch
configs only, and autotuning picks one config by speed, not by correctness: so every launch config
Inductor compiled for each kernel is run in turn (the other kernels on the launcher they hold) and
both outputs are compared bytewise with eager. On torch 2.14.1 / Triton 3.8.0 (an H200) 30 of 80
configs wrote other bytes into the transposed copy, some of them NaN/Inf; with the fix (the
``tl.where`` form) none did, nor on torch 2.11 or 2.15 (Triton 3.6 / 3.9).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

from torchfix_core.reproduction import Outcome, cannot_run, compile_caches_off, not_observed, observed, triton_version

if TYPE_CHECKING:
    import torch

#: the input shapes (rows, columns) of the cast; each compiles its own kernels
SHAPES = ((4096, 4096), (1000, 1000), (768, 3072), (257, 4096))
#: the float8 formats of float8 training (torch dtype names)
DTYPES = ("float8_e4m3fn", "float8_e5m2")
#: what the kept launchers stop torch 2.15 from unloading once autotuning picked one
_RELEASES = ("_release_static_launchers_except", "_close_static_launcher", "_close_compiled_kernel")


def cast(g: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic-scaling float8 cast of ``g``: the cast and its transposed contiguous copy."""
    import torch

    fmax = torch.finfo(dtype).max
    amax = g.abs().amax().float()
    scale = fmax / amax.clamp(min=1e-12)
    y = (g.float() * scale).clamp(-fmax, fmax).to(dtype)
    return y, y.t().contiguous()


def differing(out: torch.Tensor, ref: torch.Tensor) -> dict[str, int]:
    """Bytes of ``out`` other than ``ref``'s, and the non-finite values in ``out``."""
    import torch

    return {
        "bytes_diff": int((out.view(torch.uint8) != ref.view(torch.uint8)).sum().item()),
        "nonfinite": int((~torch.isfinite(out.float())).sum().item()),
    }


def launchers_available() -> str:
    """Why this torch's Inductor runtime cannot run each launch config ("" when it can)."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError as exc:
        return f"no Inductor Triton runtime ({exc})"
    if not hasattr(CachingAutotuner, "_make_launchers"):
        return "this torch's CachingAutotuner has no _make_launchers to record each launch config from"
    return ""


@contextlib.contextmanager
def launchers_kept() -> Iterator[list[tuple[Any, list[Any]]]]:
    """For the block: every ``CachingAutotuner`` that compiles, with all the launchers it compiled,
    recorded before autotuning keeps one (and kept loaded: torch 2.15 unloads the others). Yields
    the list it fills; restores ``CachingAutotuner`` after."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    kept: list[tuple[Any, list[Any]]] = []
    saved = {
        name: CachingAutotuner.__dict__[name]
        for name in ("_make_launchers", *_RELEASES)
        if name in vars(CachingAutotuner)
    }
    make_launchers = CachingAutotuner._make_launchers

    def _make_launchers(self: Any) -> Any:
        result = make_launchers(self)
        if self.launchers and not any(k is self for k, _ in kept):
            kept.append((self, list(self.launchers)))
        return result

    CachingAutotuner._make_launchers = _make_launchers  # type: ignore[method-assign]
    for name in _RELEASES:
        if name in saved:
            setattr(CachingAutotuner, name, staticmethod(lambda *args, **kwargs: None))
    try:
        yield kept
    finally:
        for name, value in saved.items():
            setattr(CachingAutotuner, name, value)


def every_launcher(
    fn: Any, args: tuple[Any, ...], kept: list[tuple[Any, list[Any]]], refs: tuple[Any, Any]
) -> tuple[int, list[dict[str, Any]]]:
    """Run ``fn(*args)`` once per launcher of every kernel in ``kept`` (that one swapped in, the other
    kernels on the launcher they hold) and compare its two outputs bytewise with ``refs``: the number
    of runs and, per run with any byte different, the kernel, its config and both comparisons."""
    import torch

    configs_run, red = 0, []
    for kernel, launchers in list(kept):
        for launcher in launchers:
            kernel.launchers = [launcher]
            if hasattr(kernel, "_cached_launcher"):
                kernel._cached_launcher = None
            y, yt = fn(*args)
            torch.cuda.synchronize()
            configs_run += 1
            contiguous, transposed = differing(y, refs[0]), differing(yt, refs[1])
            if contiguous["bytes_diff"] or transposed["bytes_diff"]:
                name = getattr(getattr(kernel, "fn", None), "__name__", "?")
                red.append(
                    {"kernel": name, "config": str(launcher.config), "contiguous": contiguous, "transposed": transposed}
                )
    return configs_run, red


def _generated_code(fn: Any, *args: Any) -> list[str]:
    """Run ``fn(*args)`` (its first, compiling call) and return the code Inductor wrote for it."""
    try:
        from torch._inductor.utils import run_and_get_code
    except ImportError:  # pragma: no cover - every torch the fix knows has it
        fn(*args)
        return []
    return list(run_and_get_code(fn, *args)[1])


def sweep() -> dict[str, Any]:
    """The case of the module docstring on the current CUDA device, under the compile caches'
    settings in effect (the package's GPU test turns the FX graph cache on in a directory of its
    own). Per shape and format: ``configs_run``, ``configs_red`` (configs that wrote any byte other
    than eager's), the first two red configs; in all: ``configs_run``, ``configs_red``, ``worst``
    (over the red configs: the most bytes differing in the transposed copy, the most non-finite
    values there, the most bytes differing in the contiguous copy), ``propagate_nan_in_code`` (the
    kernels Inductor generated use the PropagateNan min/max), the versions and the device."""
    import torch
    import torch._dynamo
    import torch._inductor.config as inductor_config

    dynamo_limits = {k: 64 for k in ("recompile_limit",) if hasattr(torch._dynamo.config, k)}
    cases: list[dict[str, Any]] = []
    propagate_nan_in_code = False
    with (
        inductor_config.patch(max_autotune_pointwise=True),
        torch._dynamo.config.patch(dynamo_limits),
        launchers_kept() as kept,
    ):
        for name in DTYPES:
            dtype = getattr(torch, name)
            for m, n in SHAPES:
                torch._dynamo.reset()
                kept.clear()
                torch.manual_seed(0)
                g = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3.0
                g[0, 0] = 1000.0  # one large value: most of the tensor lands in fp8's low range
                refs = cast(g, dtype)
                fn = torch.compile(cast, dynamic=False)
                propagate_nan_in_code |= any("PropagateNan" in code for code in _generated_code(fn, g, dtype))
                configs_run, red = every_launcher(fn, (g, dtype), kept, refs)
                cases.append(
                    {
                        "dtype": str(dtype),
                        "shape": [m, n],
                        "configs_run": configs_run,
                        "configs_red": len(red),
                        "red": red,
                    }
                )
        torch._dynamo.reset()
    reds = [r for c in cases for r in c["red"]]
    worst = {
        "transposed_bytes": max((r["transposed"]["bytes_diff"] for r in reds), default=0),
        "transposed_nonfinite": max((r["transposed"]["nonfinite"] for r in reds), default=0),
        "contiguous_bytes": max((r["contiguous"]["bytes_diff"] for r in reds), default=0),
    }
    for case in cases:
        case["red"] = case["red"][:2]
    return {
        "torch": torch.__version__,
        "triton": triton_version(),
        "device": torch.cuda.get_device_name(),
        "cases": cases,
        "configs_run": sum(c["configs_run"] for c in cases),
        "configs_red": sum(c["configs_red"] for c in cases),
        "worst": worst,
        "propagate_nan_in_code": propagate_nan_in_code,
    }


def _cannot_run_why() -> str:
    """What this machine lacks for the case ("" when it can run it)."""
    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA GPU: the miscompile is in Triton's code for NVIDIA GPUs"
    if getattr(torch.version, "hip", None):
        return "a ROCm build: the miscompile is in Triton's NVIDIA (PTX) code generation"
    missing = [name for name in DTYPES if not hasattr(torch, name)]
    if missing:
        return f"this torch has no {', '.join(missing)}"
    if triton_version() is None:
        return "Triton is not installed: Inductor compiles CUDA kernels with it"
    if torch.cuda.get_device_capability() < (8, 9):
        major, minor = torch.cuda.get_device_capability()
        return f"needs an FP8-capable GPU (sm89+) for Triton's float8 stores; this one is sm{major}{minor}"
    return launchers_available()


def fp8_minmax_store() -> Outcome:
    """fp8-minmax-store's reproduction (triton-lang/triton#11111): :func:`sweep` with the compile
    caches off (every launch config compiled and benchmarked here, none read from a cache). The bug
    observed where any launch config wrote other bytes than eager (the measure: how many configs;
    over them, the most bytes differing and non-finite values in the transposed copy, and the most
    bytes differing in the contiguous one); not observed where every config wrote eager's bytes.
    Cannot run without a CUDA GPU (sm89+), Triton, the float8 dtypes, or an Inductor runtime whose
    launch configs can be recorded. A sweep that ran no launch config broke."""
    why = _cannot_run_why()
    if why:
        return cannot_run(why)
    with compile_caches_off():
        r = sweep()
    if not r["configs_run"]:
        raise RuntimeError("the sweep ran no launch config: this torch's Inductor runtime records none")
    detail = (
        f"torch {r['torch']}, Triton {r['triton']}, {r['device']}; the kernels use the PropagateNan "
        f"min/max: {'yes' if r['propagate_nan_in_code'] else 'no'}"
    )
    cases = f"{len(DTYPES)} float8 formats x {len(SHAPES)} shapes"
    if not r["configs_red"]:
        return not_observed(
            f"the compiled float8 cast's contiguous and transposed copies against eager, bytewise, over "
            f"{r['configs_run']} launch configs ({cases}): 0 bytes differing",
            detail,
        )
    w = r["worst"]
    return observed(
        f"{r['configs_red']} of {r['configs_run']} launch configs ({cases}) wrote other bytes than eager: "
        f"up to {w['transposed_bytes']} bytes differing in the transposed float8 copy, up to "
        f"{w['transposed_nonfinite']} of its values non-finite; up to {w['contiguous_bytes']} bytes differing "
        f"in the contiguous copy",
        detail,
    )
