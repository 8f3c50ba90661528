"""Scenarios of the budget-rng tests, one per fresh interpreter: ``python _budget_rng_scenarios.py NAME ...``.

Prints one JSON line. The test picks the torchfix state through the environment (``only_fix``).

* ``suite BACKEND [partitions]``: ``dropout`` at budgets 0.5, 0 and 1 and ``checkpoint_region`` at
  0.5 in one interpreter (Dynamo reset between them), plus ``partitions`` when asked; keyed
  ``dropout@0.5`` ... in the result, each with ``acted``: how many events budget-rng's report
  counted during that scenario.
* ``dropout BUDGET BACKEND``: ``y = sin(2 * dropout(x, 0.5))`` compiled (``fullgraph=True``) with
  ``activation_memory_budget = BUDGET``, seeded; the dropout mask is read back from the forward
  output (``y == 0`` exactly where an element was dropped), the expected gradient
  ``cos(4 x m) * 4 m`` is computed from it and compared with the compiled backward's:
  ``mismatch`` is the fraction of elements that differ by more than 1e-4, ``max_abs_diff`` the
  largest difference.
* ``checkpoint_region BUDGET``: the same function with the dropout inside a user
  ``torch.utils.checkpoint`` region, compiled (``compile(AC(f))``: the partitioner's
  ``functionalize_rng_ops`` path).
* ``dropout_cached BUDGET [--without-key-term]``: ``dropout BUDGET inductor`` with the FX graph and
  AOTAutograd caches on, in the directory the test gives; ``cache``: their hit and miss counters.
  ``--without-key-term`` drops budget-rng's compile-cache key term once the fix is applied (its
  patch stays): the red half of the warm-cache test.
* ``two_blocks BUDGET``: pytorch#166926's shape with dropout: two non-reentrant checkpoints call one
  compiled function with 4 and 6 rows (the second recompiles it dynamic), then backward; for the
  interplay with ``recompute-cache``.
* ``partitions``: the forward and backward graph code the min-cut partitioner produces for a graph
  without random ops at several budgets and for the dropout graph at budget 1 (``aot_function``
  with the partitioner, no compile), for comparing with and without the fix.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

import torch
import torch._functorch.config as functorch_config
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

TOLERANCE = 1e-4


def block(x: torch.Tensor) -> torch.Tensor:
    return F.dropout(x, p=0.5, training=True).mul(2.0).sin()


def expected_grad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d/dx sum(sin(2 * dropout(x))) for the mask the forward used (y == 0 exactly where dropped)."""
    m = (y != 0).to(x.dtype)
    return torch.cos(x * 4.0 * m) * 4.0 * m


def compare(got: torch.Tensor, want: torch.Tensor) -> dict[str, Any]:
    diff = (got - want).abs()
    return {"mismatch": float((diff > TOLERANCE).float().mean()), "max_abs_diff": float(diff.max())}


def dropout(budget: float, backend: str) -> dict[str, Any]:
    functorch_config.activation_memory_budget = budget
    torch.manual_seed(0)
    fn = torch.compile(block, backend=backend, fullgraph=True)
    x = torch.randn(4096, requires_grad=True)
    y = fn(x)
    (gx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return {"dropped": float((y == 0).float().mean()), **compare(gx, expected_grad(x.detach(), y.detach()))}


def checkpoint_region(budget: float, backend: str) -> dict[str, Any]:
    functorch_config.activation_memory_budget = budget
    torch.manual_seed(0)

    def body(x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=False)

    fn = torch.compile(body, backend=backend, fullgraph=True)
    x = torch.randn(4096, requires_grad=True)
    y = fn(x)
    (gx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return compare(gx, expected_grad(x.detach(), y.detach()))


def dropout_cached(budget: float, without_key_term: bool) -> dict[str, Any]:
    import torch._functorch.aot_autograd  # noqa: F401 - imports budget-rng's two triggers: the fix is applied here
    from torchfix_core.testing import compile_cache_counters, drop_cache_key_term

    if without_key_term:
        drop_cache_key_term("budget-rng")
    result = dropout(budget, "inductor")
    result["cache"] = compile_cache_counters()
    return result


def two_blocks(budget: float, backend: str) -> dict[str, Any]:
    functorch_config.activation_memory_budget = budget
    torch.manual_seed(0)
    fn = torch.compile(block, backend=backend)
    x1 = torch.randn(4, 64, requires_grad=True)
    x2 = torch.randn(6, 64, requires_grad=True)
    y1 = checkpoint(fn, x1, use_reentrant=False)
    y2 = checkpoint(fn, x2, use_reentrant=False)
    (y1.sum() + y2.sum()).backward()
    a = compare(x1.grad, expected_grad(x1.detach(), y1.detach()))  # type: ignore[arg-type]
    b = compare(x2.grad, expected_grad(x2.detach(), y2.detach()))  # type: ignore[arg-type]
    return {"mismatch": max(a["mismatch"], b["mismatch"]), "max_abs_diff": max(a["max_abs_diff"], b["max_abs_diff"])}


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
    run("dropout", block, (torch.randn(64, requires_grad=True),), 1.0)
    return {"codes": codes}


def fix_row() -> dict[str, str]:
    import torchfix_core

    rows = {r.id: r for r in torchfix_core.status()}
    out = {}
    for fix_id, key in (("budget-rng", ""), ("recompute-cache", "recompute_cache_")):
        row = rows.get(fix_id)
        out[f"{key}state"] = str(row.state) if row is not None else "absent"
        out[f"{key}reason"] = str(row.reason) if row is not None else ""
    return out


def acted() -> int:
    """Events budget-rng's row of ``torchfix_core.report()`` counted so far in this process."""
    from torchfix_core.testing import report_of

    return int(report_of("budget-rng")["acted"])


SCENARIOS = {"dropout": dropout, "checkpoint_region": checkpoint_region, "two_blocks": two_blocks}
#: what ``suite`` runs: (scenario, budget)
SUITE = (("dropout", 0.5), ("dropout", 0.0), ("dropout", 1.0), ("checkpoint_region", 0.5))


def suite(backend: str, with_partitions: bool) -> dict[str, Any]:
    import torch._dynamo

    out: dict[str, Any] = {}
    for name, budget in SUITE:
        torch._dynamo.reset()
        before = acted()
        out[f"{name}@{budget}"] = SCENARIOS[name](budget, backend)
        out[f"{name}@{budget}"]["acted"] = acted() - before
    functorch_config.activation_memory_budget = 1.0
    if with_partitions:
        out.update(partitions())
    return out


def main(argv: list[str]) -> None:
    name = argv[0]
    result: dict[str, Any] = {"scenario": name, "torch": torch.__version__}
    try:
        if name == "partitions":
            result.update(partitions())
        elif name == "dropout_cached":
            result.update(budget=float(argv[1]), backend="inductor")
            result.update(dropout_cached(float(argv[1]), "--without-key-term" in argv[2:]))
        elif name == "suite":
            result["backend"] = argv[1] if len(argv) > 1 else "aot_eager"
            result.update(suite(result["backend"], "partitions" in argv[2:]))
        else:
            budget, backend = float(argv[1]), argv[2] if len(argv) > 2 else "aot_eager"
            result.update(budget=budget, backend=backend)
            result.update(SCENARIOS[name](budget, backend))
        result["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the scenario reports what happened
        result.update(ok=False, error_type=f"{type(exc).__module__}.{type(exc).__name__}", error=str(exc)[:2000])
        result["where"] = traceback.format_exc().splitlines()[-1][:200]
    result.update(fix_row())
    from torchfix_core.testing import report_of

    result["report"] = report_of("budget-rng")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
