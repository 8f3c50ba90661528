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
* ``gpu`` (one CUDA GPU): the sweep of the shipped reproduction
  (``torchfix_fp8_minmax.reproduction.sweep``: the compiled dynamic-scaling fp8 cast of float8
  training, every launch config Inductor compiled for each kernel, both outputs bytewise against
  eager) with the FX graph cache on in the test's directory: ``configs_run``, ``configs_red`` and,
  per case, the first differing configs; whether the generated kernels contain ``PropagateNan``; the
  FX graph cache counters.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from torchfix_fp8_minmax import reproduction

FIX = "fp8-minmax-store"


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of

    return report_of(FIX)


def _state() -> str:
    return str(_report()["state"])


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
        "triton": reproduction.triton_version(),
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
        "triton": reproduction.triton_version(),
        "cache": compile_cache_counters(),
        "equal": bool(torch.equal(out, f(x))),
        "state": _state(),
        "report": _report(),
    }


def gpu() -> dict[str, Any]:
    """The shipped reproduction's sweep (``torchfix_fp8_minmax.reproduction.sweep``) with the FX graph
    cache on in the test's directory, plus the cache counters and the fix's state and report."""
    import torch._inductor.config as inductor_config
    from torchfix_core.testing import compile_cache_counters

    inductor_config.fx_graph_cache = True
    result = reproduction.sweep()
    return {**result, "cache": compile_cache_counters(), "state": _state(), "report": _report()}


SCENARIOS = {"codegen": codegen, "cache": cache, "gpu": gpu}


def main(argv: list[str]) -> None:
    try:
        result: dict[str, Any] = {"ok": True, **SCENARIOS[argv[0]](*argv[1:])}
    except Exception as exc:  # noqa: BLE001 - reported to the test as JSON
        result = {"ok": False, "error_type": type(exc).__name__, "error": str(exc), "traceback": traceback.format_exc()}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
