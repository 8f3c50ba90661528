"""The budget-rng tests' own scenarios, beside the shipped ones
(``torchfix_recompute_cache.reproduction_budget_rng``): ``python _budget_rng_harness.py NAME ...``.

Prints one JSON line, as the shipped module does (its ``record``: ``ok``, the fixes' states,
budget-rng's report). The test picks the torchfix state through the environment (``only_fix``).

* ``suite BACKEND partitions``: the shipped ``suite``, then ``partitions`` in the same interpreter.
* ``partitions``: the forward and backward graph code the min-cut partitioner produces for a graph
  without random ops at several budgets and for the dropout graph at budget 1 (``aot_function``
  with the partitioner, no compile), for comparing with and without the fix.
* ``dropout_cached BUDGET [--without-key-term]``: ``dropout BUDGET inductor`` with the FX graph and
  AOTAutograd caches on, in the directory the test gives; ``cache``: their hit and miss counters.
  ``--without-key-term`` drops budget-rng's compile-cache key term once the fix is applied (its
  patch stays): the red half of the warm-cache test.

Any other scenario is the shipped module's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
import torch._functorch.config as functorch_config
from torchfix_recompute_cache import reproduction_budget_rng as shipped


def dropout_cached(budget: float, without_key_term: bool) -> dict[str, Any]:
    import torch._functorch.aot_autograd  # noqa: F401 - imports budget-rng's two triggers: the fix is applied here
    from torchfix_core.testing import compile_cache_counters, drop_cache_key_term

    if without_key_term:
        drop_cache_key_term("budget-rng")
    result = shipped.dropout(budget, "inductor")
    result["cache"] = compile_cache_counters()
    return result


def no_rng(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.relu(x @ w)
    return (torch.sin(h) * h.cos()).sum(1).exp()


def partitions() -> dict[str, Any]:
    """Graph code per (function, budget) from aot_function with the min-cut partitioner."""
    from functorch.compile import aot_function, make_boxed_func, min_cut_rematerialization_partition

    codes: dict[str, str] = {}

    def run(name: str, fn: Any, args: tuple[torch.Tensor, ...], budget: float) -> None:
        def capture(kind: str) -> Any:
            def compiler(gm: torch.fx.GraphModule, _inputs: Any) -> Any:
                codes[f"{name}@{budget}:{kind}"] = gm.code
                return make_boxed_func(gm)

            return compiler

        with functorch_config.patch(activation_memory_budget=budget):
            compiled = aot_function(
                fn,
                fw_compiler=capture("fw"),
                bw_compiler=capture("bw"),
                partition_fn=min_cut_rematerialization_partition,
            )
            out = compiled(*args)
            out.sum().backward()

    torch.manual_seed(0)
    x = torch.randn(16, 32, requires_grad=True)
    w = torch.randn(32, 32, requires_grad=True)
    for budget in (0.0, 0.05, 0.3, 0.5, 0.8, 1.0):
        run("no_rng", no_rng, (x, w), budget)
    run("dropout", shipped.block, (torch.randn(64, requires_grad=True),), 1.0)
    return {"codes": codes}


def main(argv: list[str]) -> None:
    name = argv[0]
    if name == "partitions":
        result = shipped.record(name, partitions)
    elif name == "dropout_cached":
        budget = float(argv[1])
        body = lambda: dropout_cached(budget, "--without-key-term" in argv[2:])  # noqa: E731
        result = shipped.record(name, body, budget=budget, backend="inductor")
    elif name == "suite" and "partitions" in argv[2:]:
        backend = argv[1]
        result = shipped.record(name, lambda: {**shipped.suite(backend), **partitions()}, backend=backend)
    else:
        result = shipped.run_scenario(argv)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
