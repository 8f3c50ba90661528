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

import sys
from typing import Any

from torchfix_fp8_minmax import reproduction

FIX = "fp8-minmax-store"


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of

    return report_of(FIX)


def _state() -> str:
    return str(_report()["state"])


def codegen() -> dict[str, Any]:
    import torch

    at_import = _state()
    import torch._inductor.codecache  # noqa: F401 - with codegen.triton, the fix's triggers
    from torch._inductor.codegen.triton import TritonKernelOverrides
    from torchfix_core.testing import compile_cache_key_terms

    after_trigger = _state()
    terms = compile_cache_key_terms()
    return {
        "torch": torch.__version__,
        "triton": reproduction.triton_version(),
        "states": {"import torch": at_import, "after trigger": after_trigger},
        "minimum": TritonKernelOverrides.minimum("tmp0", "tmp1"),
        "maximum": TritonKernelOverrides.maximum("tmp0", "tmp1"),
        "minimum_expr": TritonKernelOverrides.minimum("tmp0", "tmp1 + 1"),
        "fx_key_term": terms["fx"],
        "aot_key_term": terms["aot"],
        "state": _state(),
        "report": _report(),
    }


def cache(*options: str) -> dict[str, Any]:
    import torch
    import torch._inductor.codegen.triton  # noqa: F401 - with codecache, the fix's triggers: applied here
    from torchfix_core.testing import compile_with_caches

    compiled = compile_with_caches(FIX, options)
    return {
        "torch": torch.__version__,
        "triton": reproduction.triton_version(),
        "cache": compiled["cache"],
        "equal": compiled["equal"],
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


if __name__ == "__main__":
    from torchfix_core.testing import scenario_main

    scenario_main(SCENARIOS, sys.argv[1:])
