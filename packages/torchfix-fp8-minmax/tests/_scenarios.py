"""Scenarios of the fp8-minmax-store tests: ``python _scenarios.py NAME [OPTIONS]``, one JSON line.

Each runs in the fresh interpreter the test started (torchfix activated at ``import torch`` from
the environment the test set). Every result has ``torch``, ``triton`` (or null), ``state`` (the
fix's state at the end) and ``report`` (``report_of``: state, ``acted``, events).

* ``codegen`` (CPU): the fix's state after ``import torch`` and after importing
  ``torch._inductor.codegen.triton`` (the trigger); what ``TritonKernelOverrides.minimum`` /
  ``maximum`` emit for ``("tmp0", "tmp1")`` and ``("tmp0", "tmp1 + 1")``; the key term
  (torchfix-core's ``torchfix_fixes``) on a fresh ``FxGraphHashDetails`` and ``AOTAutogradCacheDetails``
  of a one-``mm`` graph (null where absent).
* ``cache`` (CPU, a C++ compiler): ``torch.compile`` of ``(x * 3).clamp(-1, 1)`` on a ``(64, 64)``
  float32 input with the FX graph and AOTAutograd caches on, in the cache directory the test gives
  (``TORCHINDUCTOR_CACHE_DIR``); the caches' hit / miss counters (``cache``) and whether the result
  equals eager. ``--without-key-term`` drops the fix's compile-cache key term once it is applied
  (its codegen patch stays): the red half of the warm-cache test.
  Run twice on one directory, it shows whether the second process reuses the first one's entry.
* ``gpu`` (one CUDA GPU): the compiled dynamic-scaling fp8 cast of float8 training
  (``amax = g.abs().amax()``, ``scale = max / amax.clamp(min=1e-12)``,
  ``y = (g.float() * scale).clamp(-max, max).to(fp8)``, returning ``y`` and ``y.t().contiguous()``)
  on bf16 inputs (``randn * 3``, seed 0, one element set to 1000), for 4096x4096, 1000x1000,
  768x3072 and 257x4096 in e4m3fn and e5m2, ``max_autotune_pointwise`` on, the FX graph cache on
  in the test's directory. Every launch config Inductor compiled for each kernel is run in turn
  (the other kernels on the launcher they hold) and both outputs are compared bytewise with eager:
  ``configs_run``, ``configs_red`` and, per case, the first differing configs; also whether the
  generated kernels contain ``PropagateNan`` and the FX graph cache counters.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

FIX = "fp8-minmax-store"
GPU_SHAPES = [(4096, 4096), (1000, 1000), (768, 3072), (257, 4096)]


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of  # here: the helpers below also serve torchfix-free scripts

    return report_of(FIX)


def _state() -> str:
    return str(_report()["state"])


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return str(triton.__version__)


def _mm_graph() -> Any:
    import torch

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.mm.default, (x, x)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def codegen() -> dict[str, Any]:
    import torch

    at_import = _state()
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCacheDetails
    from torch._guards import TracingContext, tracing
    from torch._inductor.codecache import FxGraphHashDetails
    from torch._inductor.codegen.triton import TritonKernelOverrides
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    after_trigger = _state()
    gm = _mm_graph()
    fx_details = FxGraphHashDetails(gm, [], {}, [])
    with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))):
        aot_details = AOTAutogradCacheDetails(gm, [], None, {})

    def term(details: object) -> dict[str, str] | None:
        """The compile caches' key term on ``details``: fix id -> detail (None: no term)."""
        found = getattr(details, "torchfix_fixes", None)
        return None if found is None else {fix_id: detail for fix_id, _version, detail in found}

    return {
        "torch": torch.__version__,
        "triton": _triton_version(),
        "states": {"import torch": at_import, "after trigger": after_trigger},
        "minimum": TritonKernelOverrides.minimum("tmp0", "tmp1"),
        "maximum": TritonKernelOverrides.maximum("tmp0", "tmp1"),
        "minimum_expr": TritonKernelOverrides.minimum("tmp0", "tmp1 + 1"),
        "fx_key_term": term(fx_details),
        "aot_key_term": term(aot_details),
        "state": _state(),
        "report": _report(),
    }


def cache(*options: str) -> dict[str, Any]:
    import torch
    import torch._inductor.codegen.triton  # noqa: F401 - with codecache, the fix's triggers: applied here
    import torch._inductor.config as inductor_config
    from torchfix_core.testing import compile_cache_counters, drop_cache_key_term

    if "--without-key-term" in options:
        drop_cache_key_term("fp8-minmax-store")

    inductor_config.fx_graph_cache = True
    inductor_config.fx_graph_remote_cache = False
    torch._functorch.config.enable_autograd_cache = True
    torch.manual_seed(0)
    x = torch.randn(64, 64)

    def f(t: torch.Tensor) -> torch.Tensor:
        return (t * 3).clamp(-1, 1)

    out = torch.compile(f)(x)
    return {
        "torch": torch.__version__,
        "triton": _triton_version(),
        "cache": compile_cache_counters(),
        "equal": bool(torch.equal(out, f(x))),
        "state": _state(),
        "report": _report(),
    }


def _cast(g: Any, dtype: Any) -> tuple[Any, Any]:
    import torch

    fmax = torch.finfo(dtype).max
    amax = g.abs().amax().float()
    scale = fmax / amax.clamp(min=1e-12)
    y = (g.float() * scale).clamp(-fmax, fmax).to(dtype)
    return y, y.t().contiguous()


def _differing(out: Any, ref: Any) -> dict[str, int]:
    import torch

    return {
        "bytes_diff": int((out.view(torch.uint8) != ref.view(torch.uint8)).sum().item()),
        "nonfinite": int((~torch.isfinite(out.float())).sum().item()),
    }


def _keep_launchers() -> list[tuple[Any, list[Any]]]:
    """Every ``CachingAutotuner`` with all the launchers it compiled, recorded before autotuning
    keeps one (torch 2.15 also unloads the others: kept loaded here)."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    kept: list[tuple[Any, list[Any]]] = []
    make_launchers = CachingAutotuner._make_launchers

    def _make_launchers(self: Any) -> Any:
        result = make_launchers(self)
        if self.launchers and not any(k is self for k, _ in kept):
            kept.append((self, list(self.launchers)))
        return result

    CachingAutotuner._make_launchers = _make_launchers  # type: ignore[method-assign]
    for name in ("_release_static_launchers_except", "_close_static_launcher", "_close_compiled_kernel"):
        if hasattr(CachingAutotuner, name):
            setattr(CachingAutotuner, name, staticmethod(lambda *args, **kwargs: None))
    return kept


def _every_launcher(
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
            contiguous, transposed = _differing(y, refs[0]), _differing(yt, refs[1])
            if contiguous["bytes_diff"] or transposed["bytes_diff"]:
                name = getattr(getattr(kernel, "fn", None), "__name__", "?")
                red.append(
                    {"kernel": name, "config": str(launcher.config), "contiguous": contiguous, "transposed": transposed}
                )
    return configs_run, red


def gpu() -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from torchfix_core.testing import compile_cache_counters

    inductor_config.fx_graph_cache = True
    inductor_config.max_autotune_pointwise = True
    torch._dynamo.config.recompile_limit = 64
    kept = _keep_launchers()
    cases = []
    propagate_nan_in_code = False
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        for m, n in GPU_SHAPES:
            torch._dynamo.reset()
            kept.clear()
            torch.manual_seed(0)
            g = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3.0
            g[0, 0] = 1000.0
            ref_y, ref_t = _cast(g, dtype)
            fn = torch.compile(_cast, dynamic=False)
            _, code = run_and_get_code(fn, g, dtype)
            propagate_nan_in_code |= any("PropagateNan" in c for c in code)
            configs_run, red = _every_launcher(fn, (g, dtype), kept, (ref_y, ref_t))
            cases.append(
                {
                    "dtype": str(dtype),
                    "shape": [m, n],
                    "configs_run": configs_run,
                    "configs_red": len(red),
                    "red": red[:2],
                }
            )
    return {
        "torch": torch.__version__,
        "triton": _triton_version(),
        "device": torch.cuda.get_device_name(),
        "cases": cases,
        "configs_run": sum(c["configs_run"] for c in cases),
        "configs_red": sum(c["configs_red"] for c in cases),
        "propagate_nan_in_code": propagate_nan_in_code,
        "cache": compile_cache_counters(),
        "state": _state(),
        "report": _report(),
    }


SCENARIOS = {"codegen": codegen, "cache": cache, "gpu": gpu}


def main(argv: list[str]) -> None:
    try:
        result: dict[str, Any] = {"ok": True, **SCENARIOS[argv[0]](*argv[1:])}
    except Exception as exc:  # noqa: BLE001 - reported to the test as JSON
        result = {"ok": False, "error_type": type(exc).__name__, "error": str(exc), "traceback": traceback.format_exc()}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
