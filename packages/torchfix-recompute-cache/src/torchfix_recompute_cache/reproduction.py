"""recompute-cache's reproduction (``FixSpec.reproduction``: :func:`recompute_cache`), and the
scenarios behind it: ``python -m torchfix_recompute_cache.reproduction NAME [BACKEND]``.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests, its demo and the combination suite run; imported only when a reproduction runs (it imports
torch inside its functions). Each scenario wants a fresh interpreter: Dynamo's cache and its LRU
switch are process-wide, and the scenario's checkpoint must be the process's first.

Prints one JSON line: ``ok`` (no exception), the error's type, message and traceback, whether the gradients equal
an eager (uncompiled) reference, the fix's state and reason, its ``report`` (``report_of``: state,
``acted``, events), and ``reorders``: whether Dynamo still
moved a cache entry to the front on a hit at the end (read from the cache entry list, see
:func:`lru_reorders`). The caller decides which torchfix state to run under through the environment
(``TORCHFIX_DISABLE=all`` plus ``TORCHFIX_RECOMPUTE_CACHE_ENABLED=1`` or ``0``).
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from typing import TYPE_CHECKING, Any, Callable

from torchfix_core.reproduction import Outcome, not_observed, observed

if TYPE_CHECKING:
    import torch

#: the gradients' tolerance against the eager reference (the compiled graphs are not bit-exact)
RTOL, ATOL = 1e-5, 1e-6


def inner(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    import torch

    h = torch.sin(x @ w)
    return torch.cos(h) * h.sum(0)


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    import torch

    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    x1 = torch.randn(4, 8, requires_grad=True)
    x2 = torch.randn(6, 8, requires_grad=True)
    return w, x1, x2


def grads(step: Callable[[Callable[..., torch.Tensor], Any, Any, Any], torch.Tensor], fn: Any) -> list[torch.Tensor]:
    w, x1, x2 = inputs()
    step(fn, w, x1, x2).backward()
    return [t.grad.detach().clone() for t in (w, x1, x2)]  # type: ignore[union-attr]


def two_checkpointed_blocks(fn: Any, w: Any, x1: Any, x2: Any) -> torch.Tensor:
    """pytorch#166926's shape: blocks 1 and 2 call one compiled function with 4 and 6 rows, both
    checkpointed; block 2 recompiles it (automatic dynamic), block 1's recompute then meets the
    dynamic graph first."""
    from torch.utils.checkpoint import checkpoint

    y1 = checkpoint(fn, x1, w, use_reentrant=False)
    y2 = checkpoint(fn, x2, w, use_reentrant=False)
    return y1.sum() + y2.sum()


def checkpointed_then_plain(fn: Any, w: Any, x1: Any, x2: Any) -> torch.Tensor:
    """A checkpointed block, then an uncheckpointed call of the same compiled function with a new
    shape (selective per-layer AC): LRU must stay off between the forward and the recompute too."""
    from torch.utils.checkpoint import checkpoint

    y1 = checkpoint(fn, x1, w, use_reentrant=False)
    y2 = fn(x2, w)
    return y1.sum() + y2.sum()


def checkpoint_inside_compile(fn: Any, w: Any, x1: Any, x2: Any) -> torch.Tensor:
    """compile(AC(fn)): checkpoint traced by Dynamo as a higher-order op (fn is the eager ``inner``)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    def body(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return checkpoint(inner, x, w, use_reentrant=False)

    compiled = torch.compile(body, backend=BACKEND, fullgraph=True)
    return compiled(x1, w).sum() + compiled(x2, w).sum()


STEPS = {
    "two_checkpointed_blocks": two_checkpointed_blocks,
    "checkpointed_then_plain": checkpointed_then_plain,
    "checkpoint_inside_compile": checkpoint_inside_compile,
}


def lru_reorders() -> bool:
    """Whether Dynamo moves an entry to the front on a hit *now*: compile a fresh function for 3, 5
    and 7 rows (three static entries), hit the middle one (5 rows) again, and report whether it is
    then first in the code object's cache entry list (LRU: ``[5, 7, 3]``; insertion order: ``[3, 5, 7]``)."""
    import torch
    import torch._dynamo

    def probe_fn(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    def codes() -> list[Any]:
        return [e.code for e in torch._C._dynamo.eval_frame._debug_get_cache_entry_list(probe_fn.__code__)]

    compiled = torch.compile(probe_fn, backend="eager", dynamic=False)
    compiled(torch.zeros(3))
    before = codes()
    compiled(torch.zeros(5))
    middle = next(c for c in codes() if all(c is not b for b in before))
    compiled(torch.zeros(7))
    compiled(torch.zeros(5))  # a hit on the middle entry
    order = codes()
    assert len(order) == 3 and torch._dynamo is not None
    return order[0] is middle


def fix_row() -> dict[str, str]:
    import torchfix_core

    row = next((r for r in torchfix_core.status() if r.id == "recompute-cache"), None)
    return {"state": str(row.state), "reason": str(row.reason)} if row is not None else {"state": "absent"}


BACKEND = "aot_eager"


def run_scenario(name: str, backend: str = "aot_eager") -> dict[str, Any]:
    """Scenario ``name`` compiled with ``backend`` in this interpreter; the result the module
    docstring describes (``max_abs_diff``: the gradients' largest difference from the reference)."""
    global BACKEND
    import torch

    BACKEND = backend
    if torch.cuda.is_available():
        # on a machine with a GPU, compiling inside the checkpoint's forward initializes CUDA there,
        # which the checkpoint's RNG-state preservation refuses ("device state was initialized in the
        # forward pass of a Checkpoint"): initialize it first, as a GPU training job has (seen by
        # torchfix-doctor verify on an H100, torch 2.11.0)
        torch.cuda.init()
    result: dict[str, Any] = {"scenario": name, "backend": BACKEND, "torch": torch.__version__}
    if name == "program_sets_switch":
        # the program sets the switch itself (torchtitan's call), here to True, before any checkpoint
        importlib.import_module("torch._dynamo")  # the fix applies here

        torch._C._dynamo.eval_frame._set_lru_cache(True)
        name = "two_checkpointed_blocks"
    if name == "switch_off_before_apply":
        # the program turns LRU off before torchfix applies (TORCHFIX_AUTOLOAD=0, then apply())
        import torchfix_core

        reported = torch._C._dynamo.eval_frame._set_lru_cache(False)
        result["switch_reports"] = isinstance(reported, bool)
        torchfix_core.apply(only=["recompute-cache"])
        importlib.import_module("torch._dynamo")
        name = "two_checkpointed_blocks"
    if name == "no_checkpoint":
        result["ok"] = True
    else:
        step = STEPS[name]
        fn = inner if name == "checkpoint_inside_compile" else torch.compile(inner, backend=BACKEND)
        try:
            got = grads(step, fn)  # the process's first checkpoint: the compiled run comes first
        except Exception as exc:  # noqa: BLE001 - the scenario reports what happened
            result.update(ok=False, error_type=f"{type(exc).__module__}.{type(exc).__name__}", error=str(exc))
            result["where"] = traceback.format_exc().splitlines()[-1][:200]
            result["traceback"] = traceback.format_exc()  # as Python prints it (the signature tests read it)
        else:
            reference = (
                grads(step, inner) if name != "checkpoint_inside_compile" else grads(two_checkpointed_blocks, inner)
            )
            result["ok"] = True
            result["grads_match"] = all(torch.allclose(a, b, rtol=RTOL, atol=ATOL) for a, b in zip(got, reference))
            result["max_abs_diff"] = max(float((a - b).abs().max()) for a, b in zip(got, reference))
    result["reorders"] = lru_reorders()
    result.update(fix_row())
    from torchfix_core.testing import report_of

    result["report"] = report_of("recompute-cache")
    return result


def main(argv: list[str]) -> None:
    """``NAME [BACKEND]``: run one scenario, print its result as one JSON line."""
    print(json.dumps(run_scenario(argv[0], argv[1] if len(argv) > 1 else "aot_eager")))


#: the bug's error (torch.utils.checkpoint.CheckpointError), as 2.10-2.15 word it
BUG_ERRORS = ("Recomputed values", "more tensors")


def recompute_cache() -> Outcome:
    """recompute-cache's reproduction (pytorch#166926): scenario ``two_checkpointed_blocks`` with
    ``aot_eager``, the interpreter's first checkpoint. The bug observed where the recompute raises
    the checkpoint's metadata error (the measure: the exception) or gets other gradients than eager
    (the measure: the largest difference); not observed where the gradients of ``w``, ``x1`` and
    ``x2`` match eager code's. Another failure means the reproduction broke."""
    r = run_scenario("two_checkpointed_blocks")
    if not r["ok"]:
        kind = r["error_type"].rsplit(".", 1)[-1]
        if kind != "CheckpointError" or not any(e in r["error"] for e in BUG_ERRORS):
            raise RuntimeError(f"failed otherwise than the bug: {r['error_type']}: {r['error'][:300]}")
        return observed(f"{kind}: {r['error'].splitlines()[0][:160]}")
    compared = f"the gradients of w, x1, x2 against eager (rtol {RTOL:g}, atol {ATOL:g})"
    if not r["grads_match"]:
        return observed(f"{compared}: max abs diff {r['max_abs_diff']:.3g}")
    return not_observed(f"{compared}: max abs diff {r['max_abs_diff']:.3g}")


if __name__ == "__main__":
    main(sys.argv[1:])
