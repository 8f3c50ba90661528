"""Scenarios of the inductor-rand4x-dropout tests: ``python _scenarios.py NAME [OPTIONS]``, one JSON line.

Each runs in the fresh interpreter the test started (torchfix activated at ``import torch`` from
the environment the test set). Every result has ``torch``, ``triton`` (or null), ``state`` (the
fix's state at the end) and ``report`` (``report_of``: state, ``acted``, events).

* ``codegen`` (CPU): the fix's state after ``import torch`` and after importing
  ``torch._inductor.codegen.triton`` (the trigger); what ``TritonOverrides._can_use_4x_random()``,
  ``rand("seed", "offset")`` and ``randn(...)`` give inside a minimal Triton kernel context on a CUDA
  device (:func:`kernel_context`: a ``TritonKernel`` whose tensors are 1-D, and one whose tensors are
  2-D, built without a GPU), with ``TORCHINDUCTOR_USE_RAND4X`` unset and set to ``1``; the key term
  (torchfix-core's ``torchfix_fixes``) on a fresh ``FxGraphHashDetails`` and ``AOTAutogradCacheDetails``
  of a one-``mm`` graph, unset and opted in (null where absent); then, after
  ``torchfix_core.revert(only=[FIX])``, whether ``_can_use_4x_random`` is torch's own object again and
  what ``rand`` emits.
* ``cache`` (CPU, a C++ compiler): ``torch.compile`` of ``(x * 3).clamp(-1, 1)`` on a ``(64, 64)``
  float32 input with the FX graph and AOTAutograd caches on, in the cache directory the test gives
  (``TORCHINDUCTOR_CACHE_DIR``); the caches' hit / miss counters (``cache``) and whether the result
  equals eager. ``--without-key-term`` drops the fix's compile-cache key term once it is applied
  (its codegen patch stays): the red half of the warm-cache test.
* ``gpu`` (one CUDA GPU): the shipped reproduction's measurement
  (``torchfix_inductor_rand4x.reproduction.measure``: compiled dropout of a transposed copy, without and
  under checkpointing) with the FX graph and AOTAutograd caches on in the test's directory, judged
  (``harm``), plus the caches' counters. ``--without-key-term`` as for ``cache``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

FIX = "inductor-rand4x-dropout"
OPT_IN = "TORCHINDUCTOR_USE_RAND4X"


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of

    return report_of(FIX)


def _state() -> str:
    return str(_report()["state"])


def _triton() -> str | None:
    from torchfix_inductor_rand4x.reproduction import triton_version

    return triton_version()


@contextlib.contextmanager
def kernel_context(ndim: int) -> Iterator[None]:
    """Inductor's virtualized handlers as inside the codegen of a Triton kernel on a CUDA device whose
    tensors have ``ndim`` dimensions: a ``TritonKernel`` subclass instance (never initialised) that
    answers ``triton_tensor_ndim`` and ``dense_size_list``, and a graph handler whose current device is
    ``cuda``. What ``_can_use_4x_random`` and ``rand``/``randn`` read, without a GPU."""
    import torch
    import torch._inductor.select_algorithm  # noqa: F401 - _can_use_4x_random reads it as an attribute
    from torch._inductor.codegen.triton import TritonKernel
    from torch._inductor.virtualized import V

    class Kernel(TritonKernel):  # type: ignore[misc]
        def triton_tensor_ndim(self) -> int:
            return ndim

        def dense_size_list(self) -> list[str]:
            return ["XBLOCK"] if ndim == 1 else ["YBLOCK", "XBLOCK"][-ndim:]

    class Graph:
        def get_current_device_or_throw(self) -> torch.device:
            return torch.device("cuda")

    with V.set_graph_handler(Graph()), V.set_kernel_handler(Kernel.__new__(Kernel)):  # type: ignore[arg-type]
        yield


@contextlib.contextmanager
def opted_in(on: bool) -> Iterator[None]:
    """``TORCHINDUCTOR_USE_RAND4X=1`` set (``on``) or unset for the block."""
    saved = os.environ.pop(OPT_IN, None)
    if on:
        os.environ[OPT_IN] = "1"
    try:
        yield
    finally:
        os.environ.pop(OPT_IN, None)
        if saved is not None:
            os.environ[OPT_IN] = saved


def random_codegen(ndim: int) -> dict[str, Any]:
    """``_can_use_4x_random()`` (null where it does not exist), ``rand`` and ``randn`` in
    :func:`kernel_context` of ``ndim``."""
    from torch._inductor.codegen.triton import TritonOverrides

    gate = getattr(TritonOverrides, "_can_use_4x_random", None)
    with kernel_context(ndim):
        return {
            "gate": None if gate is None else bool(gate()),
            "rand": str(TritonOverrides.rand("seed", "offset")),
            "randn": str(TritonOverrides.randn("seed", "offset")),
        }


def _key_terms() -> dict[str, Any]:
    from torchfix_core.testing import compile_cache_key_terms

    return compile_cache_key_terms()


def codegen() -> dict[str, Any]:
    import torch

    at_import = _state()
    import torch._inductor.codegen.triton as codegen_module
    import torchfix_core

    after_trigger = _state()
    overrides = codegen_module.TritonOverrides
    with opted_in(False):
        one_d, two_d, keys = random_codegen(1), random_codegen(2), _key_terms()
    with opted_in(True):
        one_d_opted_in, keys_opted_in = random_codegen(1), _key_terms()
    report = _report()
    state = _state()
    installed = vars(overrides).get("_can_use_4x_random")
    torchfix_core.revert(only=[FIX])
    restored = vars(overrides).get("_can_use_4x_random")
    with opted_in(False):
        one_d_reverted = random_codegen(1)
    own = getattr(restored, "__func__", None)
    return {
        "torch": torch.__version__,
        "triton": _triton(),
        "states": {"import torch": at_import, "after trigger": after_trigger},
        "one_d": one_d,
        "two_d": two_d,
        "one_d_opted_in": one_d_opted_in,
        "key_terms": keys,
        "key_terms_opted_in": keys_opted_in,
        "patched": installed is not restored,
        # torch's own static method again (or still none, where this torch has no 4x path)
        "restored_is_torchs": (
            restored is None
            if installed is None
            else own is not None and getattr(own, "__torchfix_fix__", None) is None
        ),
        "one_d_reverted": one_d_reverted,
        "state": state,
        "report": report,
    }


def cache(*options: str) -> dict[str, Any]:
    import torch
    import torch._inductor.codegen.triton  # noqa: F401 - with codecache, the fix's triggers: applied here
    from torchfix_core.testing import compile_with_caches

    compiled = compile_with_caches(FIX, options)
    return {
        "torch": torch.__version__,
        "triton": _triton(),
        "cache": compiled["cache"],
        "equal": compiled["equal"],
        "state": _state(),
        "report": _report(),
    }


def gpu(*options: str) -> dict[str, Any]:
    """The shipped reproduction's measurement with the FX graph and AOTAutograd caches on in the test's
    directory, judged, plus the cache counters and the fix's state and report."""
    import torch
    import torch._inductor.codegen.triton  # noqa: F401 - the fix's triggers: applied here
    from torchfix_core.testing import compile_cache_counters, compile_caches_on, drop_cache_key_term
    from torchfix_inductor_rand4x import reproduction

    if "--without-key-term" in options:
        drop_cache_key_term(FIX)
    compile_caches_on()
    result = reproduction.measure()
    return {
        **result,
        "harm": reproduction.harm(result),
        "cache": compile_cache_counters(),
        "state": _state(),
        "report": _report(),
    }


SCENARIOS = {"codegen": codegen, "cache": cache, "gpu": gpu}


if __name__ == "__main__":
    from torchfix_core.testing import scenario_main

    scenario_main(SCENARIOS, sys.argv[1:])
