"""Scenarios of the mix-order-view-write tests: ``python _scenarios.py NAME [OPTIONS]``, one JSON line.

Each runs in the fresh interpreter the test started (torchfix activated at ``import torch`` from
the environment the test set). Every result has ``torch``, ``state`` (the fix's state at the end)
and ``report`` (``report_of``: state, ``acted``, events).

* ``emit`` (CPU): the fix's state after ``import torch`` and after importing
  ``torch._inductor.codegen.simd`` (with codecache, the triggers); the wrapper lines the live
  ``SIMDScheduling._codegen_mix_order_reduction`` writes for a view output and a plain one, in
  float32 and bfloat16 (``_emit.py``: the release's function driven with stand-ins), and those
  lines run on tensors (whether the viewed region was written); the key term (torchfix-core's
  ``torchfix_fixes``) on a fresh ``FxGraphHashDetails`` and ``AOTAutogradCacheDetails`` of a
  one-``mm`` graph (null where absent).
* ``cache`` (CPU, a C++ compiler): ``torch.compile`` of ``(x * 3).clamp(-1, 1)`` on a ``(64, 64)``
  float32 input with the FX graph and AOTAutograd caches on, in the cache directory the test gives
  (``TORCHINDUCTOR_CACHE_DIR``); the caches' hit / miss counters (``cache``) and whether the result
  equals eager. ``--without-key-term`` drops the fix's key term once it is applied (its codegen
  patch stays): the red half of the warm-cache test.
* ``gpu`` (one CUDA GPU): the shipped reproduction's case (``torchfix_mix_order.reproduction.case``,
  float32, or the dtype given) with the FX graph and AOTAutograd caches on in the test's directory:
  the per-chunk errors, the chunks wrong, the mix-order kernels generated, the cache counters.
  ``--without-key-term`` as for ``cache``.
"""

from __future__ import annotations

import sys
from typing import Any

import _emit

FIX = "mix-order-view-write"


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of

    return report_of(FIX)


def _state() -> str:
    return str(_report()["state"])


def emit() -> dict[str, Any]:
    import torch

    at_import = _state()
    import torch._inductor.codecache  # noqa: F401 - with codegen.simd, the fix's triggers
    import torch._inductor.codegen.simd  # noqa: F401
    from torchfix_core.testing import compile_cache_key_terms

    after_trigger = _state()
    lines, runs = {}, {}
    for dtype in ("float32", "bfloat16"):
        emitted = _emit.emitted_lines(dtype)
        lines[dtype] = [line for line in emitted if line.startswith(("buf3", "buf5"))]
        runs[dtype] = _emit.run_lines(emitted, dtype)
    terms = compile_cache_key_terms()
    return {
        "torch": torch.__version__,
        "states": {"import torch": at_import, "after trigger": after_trigger},
        "lines": lines,
        "runs": runs,
        "fx_key_term": terms["fx"],
        "aot_key_term": terms["aot"],
        "state": _state(),
        "report": _report(),
    }


def cache(*options: str) -> dict[str, Any]:
    import torch
    import torch._inductor.codecache  # noqa: F401 - with codegen.simd, the fix's triggers: applied here
    import torch._inductor.codegen.simd  # noqa: F401
    from torchfix_core.testing import compile_with_caches

    compiled = compile_with_caches(FIX, options)
    return {
        "torch": torch.__version__,
        "cache": compiled["cache"],
        "equal": compiled["equal"],
        "state": _state(),
        "report": _report(),
    }


def gpu(*options: str) -> dict[str, Any]:
    """The shipped reproduction's case with the compile caches on in the test's directory, plus the
    cache counters and the fix's state and report."""
    import torch._inductor.codecache  # noqa: F401 - the fix's triggers
    import torch._inductor.codegen.simd  # noqa: F401
    from torchfix_core.testing import compile_cache_counters, compile_caches_on, drop_cache_key_term
    from torchfix_mix_order import reproduction

    if "--without-key-term" in options:
        drop_cache_key_term(FIX)
    dtype = next((o for o in options if not o.startswith("--")), "float32")
    compile_caches_on()
    result = reproduction.case(dtype)
    return {**result, "cache": compile_cache_counters(), "state": _state(), "report": _report()}


SCENARIOS = {"emit": emit, "cache": cache, "gpu": gpu}


if __name__ == "__main__":
    from torchfix_core.testing import scenario_main

    scenario_main(SCENARIOS, sys.argv[1:])
