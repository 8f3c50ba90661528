"""budget-rng's reproduction (``FixSpec.reproduction``: :func:`budget_rng`), and the scenarios
behind it: ``python -m torchfix_recompute_cache.reproduction_budget_rng NAME ...``.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests, its demo and the combination suite run; imported only when a reproduction runs (it imports
torch inside its functions). Each scenario wants a fresh interpreter, with a compile cache directory
of its own where it compiles with inductor (``TORCHINDUCTOR_CACHE_DIR``).

Prints one JSON line. The caller picks the torchfix state through the environment (``only_fix``).

* ``suite BACKEND``: ``dropout`` at budgets 0.5, 0 and 1 and ``checkpoint_region`` at
  0.5 in one interpreter (Dynamo reset between them); keyed
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
* ``two_blocks BUDGET``: pytorch#166926's shape with dropout: two non-reentrant checkpoints call one
  compiled function with 4 and 6 rows (the second recompiles it dynamic), then backward; for the
  interplay with ``recompute-cache``.

The tests' own scenarios (the partitions' graph code, the warm compile caches) are in the package's
``tests/_budget_rng_harness.py``, which runs these through :func:`record`.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import TYPE_CHECKING, Any, Callable

from torchfix_core.reproduction import Outcome, not_observed, observed

if TYPE_CHECKING:
    import torch

TOLERANCE = 1e-4
#: the input's length in ``dropout`` and ``checkpoint_region``
ELEMENTS = 4096


def block(x: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return F.dropout(x, p=0.5, training=True).mul(2.0).sin()


def expected_grad(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d/dx sum(sin(2 * dropout(x))) for the mask the forward used (y == 0 exactly where dropped)."""
    import torch

    m = (y != 0).to(x.dtype)
    return torch.cos(x * 4.0 * m) * 4.0 * m


def compare(got: torch.Tensor, want: torch.Tensor) -> dict[str, Any]:
    diff = (got - want).abs()
    return {"mismatch": float((diff > TOLERANCE).float().mean()), "max_abs_diff": float(diff.max())}


def dropout(budget: float, backend: str) -> dict[str, Any]:
    import torch
    import torch._functorch.config as functorch_config

    functorch_config.activation_memory_budget = budget
    torch.manual_seed(0)
    fn = torch.compile(block, backend=backend, fullgraph=True)
    x = torch.randn(ELEMENTS, requires_grad=True)
    y = fn(x)
    (gx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return {"dropped": float((y == 0).float().mean()), **compare(gx, expected_grad(x.detach(), y.detach()))}


def checkpoint_region(budget: float, backend: str) -> dict[str, Any]:
    import torch
    import torch._functorch.config as functorch_config
    from torch.utils.checkpoint import checkpoint

    functorch_config.activation_memory_budget = budget
    torch.manual_seed(0)

    def body(x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=False)

    fn = torch.compile(body, backend=backend, fullgraph=True)
    x = torch.randn(ELEMENTS, requires_grad=True)
    y = fn(x)
    (gx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return compare(gx, expected_grad(x.detach(), y.detach()))


def two_blocks(budget: float, backend: str) -> dict[str, Any]:
    import torch
    import torch._functorch.config as functorch_config
    from torch.utils.checkpoint import checkpoint

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


def suite(backend: str) -> dict[str, Any]:
    import torch._dynamo
    import torch._functorch.config as functorch_config

    out: dict[str, Any] = {}
    for name, budget in SUITE:
        torch._dynamo.reset()
        before = acted()
        out[f"{name}@{budget}"] = SCENARIOS[name](budget, backend)
        out[f"{name}@{budget}"]["acted"] = acted() - before
    functorch_config.activation_memory_budget = 1.0
    return out


def record(name: str, body: Callable[[], dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """One scenario's result: ``fields``, then what ``body()`` returns and ``ok``, or the error it
    raised (``ok`` false, its type, message and last line); the fixes' states and budget-rng's report."""
    import torch

    result: dict[str, Any] = {"scenario": name, "torch": torch.__version__, **fields}
    try:
        result.update(body())
        result["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the scenario reports what happened
        result.update(ok=False, error_type=f"{type(exc).__module__}.{type(exc).__name__}", error=str(exc)[:2000])
        result["where"] = traceback.format_exc().splitlines()[-1][:200]
    result.update(fix_row())
    from torchfix_core.testing import report_of

    result["report"] = report_of("budget-rng")
    return result


def run_scenario(argv: list[str]) -> dict[str, Any]:
    """``suite [BACKEND]`` or ``NAME BUDGET [BACKEND]`` (the module docstring's scenarios)."""
    name = argv[0]
    if name == "suite":
        backend = argv[1] if len(argv) > 1 else "aot_eager"
        return record(name, lambda: suite(backend), backend=backend)
    budget, backend = float(argv[1]), argv[2] if len(argv) > 2 else "aot_eager"
    return record(name, lambda: SCENARIOS[name](budget, backend), budget=budget, backend=backend)


def main(argv: list[str]) -> None:
    """Run one scenario, print its result as one JSON line."""
    print(json.dumps(run_scenario(argv)))


#: the budgets of the reproduction: 0 (everything recomputed) and 0.5 (the knapsack's trade)
BUDGETS = (0.5, 0.0)


def budget_rng() -> Outcome:
    """budget-rng's reproduction (pytorch#190758, #190717): scenario ``dropout`` with ``aot_eager``
    at budgets 0.5 and 0, in this interpreter (Dynamo reset between them). The bug observed where the
    compiled gradient differs from the one the forward's dropout mask implies (the measure: the share
    of the gradient's elements that are wrong, and the largest difference, per budget); not observed
    where it equals it at both budgets. Another failure (or a dropout that dropped nothing, which
    would prove nothing) means the reproduction broke."""
    import torch._dynamo
    import torch._functorch.config as functorch_config

    previous = functorch_config.activation_memory_budget
    cells, wrong = [], False
    try:
        for budget in BUDGETS:
            torch._dynamo.reset()
            r = dropout(budget, "aot_eager")
            if not 0.4 < r["dropped"] < 0.6:
                raise RuntimeError(f"dropout(p=0.5) dropped {r['dropped']:.1%} of the elements at budget {budget:g}")
            wrong = wrong or r["mismatch"] > 0
            cells.append(f"budget {budget:g}: {r['mismatch']:.1%} wrong, max abs diff {r['max_abs_diff']:.3g}")
    finally:
        functorch_config.activation_memory_budget = previous
        torch._dynamo.reset()
    measure = (
        f"the compiled gradient of sin(2 * dropout(x)) against the one the forward's mask implies "
        f"({ELEMENTS} elements): {'; '.join(cells)}"
    )
    return observed(measure) if wrong else not_observed(measure)


if __name__ == "__main__":
    main(sys.argv[1:])
