"""The reproductions of both fixes (``FixSpec.reproduction``: :func:`cast`, :func:`unshard`), and
the scenarios behind them: ``python -m torchfix_fsdp_recompute.reproduction NAME WORLD [OPTIONS]``.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests, its demo and the combination suite run; imported only when a reproduction runs (it imports
torch inside its functions).

The parent spawns ``WORLD`` ranks with ``torch.multiprocessing`` (fresh interpreters, ``spawn``:
each activates torchfix at ``import torch`` from the environment the test set), joined by a gloo
process group on the CPU through a TCP rendezvous on a free local port. Every rank runs the
scenario, then the same training without checkpointing (the reference) on the same initial
weights, and writes its result; the parent prints one JSON line: ``ok`` (no rank raised), the
first error's type, message and traceback, ``grads_equal`` (every step's local gradient shards and losses
bit-identical to the reference on every rank), the largest absolute difference, and each
fsdp-recompute fix's state on rank 0, and ``report``: each fix's row of ``torchfix_core.report()`` on
rank 0 at the end (``report_of``: state, ``acted``, events; the reference run recomputes nothing).

Scenarios (all: fp32 inputs, ``torch.manual_seed(0)``, 3 SGD steps):

* ``cast``: Hugging Face style. Two ``Block``s (``Linear(16, 16)``, ReLU, ``Linear(16, 16)``) in a
  model with an fp32 residual stream, ``fully_shard`` on each block and on the model, all with
  ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``; each block's call wrapped
  in ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` (pytorch#159359).
* ``unshard``: pytorch#187437's shape. A ``Block`` checkpointed by the composable
  ``torch.distributed._composable.checkpoint``, ``fully_shard`` on its ``fc1`` only (fp32, no
  mixed precision), loss ``(m(x1) * m(x2)).sum()``: two forwards before one backward.
* ``both``: ``unshard`` with ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32,
  output_dtype=float32)`` on ``fc1`` (its output goes back to fp32 for the unsharded fp32 ``fc2``):
  needs both fixes, and the ``output_dtype`` cast of the recompute.

Options: ``--late-apply ID[,ID]`` (run with ``TORCHFIX_AUTOLOAD=0``): shard first, then
``torchfix_core.apply(only=...)`` per id in that order, then train: modules sharded before the fix
was applied. ``--late-revert ID[,ID]``: shard with the fixes applied, revert those, then train.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import traceback
from typing import Any

from torchfix_core.reproduction import Outcome, not_observed, observed

FIXES = ("fsdp-recompute-cast", "fsdp-recompute-unshard")
STEPS = 3


def _options(argv: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"late_apply": [], "late_revert": []}
    for flag, key in (("--late-apply", "late_apply"), ("--late-revert", "late_revert")):
        if flag in argv:
            out[key] = argv[argv.index(flag) + 1].split(",")
    return out


def _build(name: str, checkpointed: bool) -> tuple[Any, Any]:
    """The model (sharded) and a function running one step's forward and returning the loss."""
    import torch
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.utils.checkpoint import checkpoint

    mesh = init_device_mesh("cpu", (torch.distributed.get_world_size(),))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(16, 16)
            self.fc2 = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(self.fc1(x).relu())

    torch.manual_seed(0)
    if name == "cast":

        class Model(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.blocks = nn.ModuleList([Block(), Block()])

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                h = x
                for block in self.blocks:
                    y = checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)
                    h = h + y.float()  # fp32 residual stream: each block's input is fp32
                return h

        model = Model()
        for block in model.blocks:
            fully_shard(block, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)

        def loss(step: int) -> torch.Tensor:
            x = _batch(step, 0)
            return model(x).float().pow(2).mean()

        return model, loss

    model = Block()
    if checkpointed:
        torch.distributed._composable.checkpoint(model)
    # ``both``: fc1 casts its output back to fp32 for the unsharded fp32 fc2 (output_dtype)
    out_fp32 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32)
    fully_shard(model.fc1, mesh=mesh, **({"mp_policy": out_fp32} if name == "both" else {}))

    def two_forwards(step: int) -> torch.Tensor:
        x1, x2 = _batch(step, 0).requires_grad_(), _batch(step, 1).requires_grad_()
        return (model(x1).float() * model(x2).float()).sum()

    return model, two_forwards


def _batch(step: int, which: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(1000 * step + 10 * which + torch.distributed.get_rank())
    return torch.randn(4, 16, generator=g)


def _train(name: str, checkpointed: bool, late: dict[str, list[str]] | None = None) -> dict[str, Any]:
    import torch

    model, step_loss = _build(name, checkpointed)
    if late:
        import torchfix_core

        for fix_id in late["late_apply"]:
            torchfix_core.apply(only=[fix_id])
        for fix_id in late["late_revert"]:
            torchfix_core.revert(only=[fix_id])
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    grads: list[list[torch.Tensor]] = []
    losses: list[float] = []
    for step in range(STEPS):
        optim.zero_grad()
        loss = step_loss(step)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append([getattr(p.grad, "to_local", p.grad.detach)().detach().clone() for p in model.parameters()])
        optim.step()
    return {"grads": grads, "losses": losses}


def _states() -> dict[str, str]:
    try:
        import torchfix_core
    except ImportError:
        return {}
    return {r.id: str(r.state) for r in torchfix_core.status() if r.id in FIXES}


def _report() -> dict[str, Any]:
    try:
        from torchfix_core.testing import report_of
    except ImportError:
        return {}
    return {fix_id: report_of(fix_id) for fix_id in FIXES}


def _rank(rank: int, world: int, port: int, name: str, out_dir: str, late: dict[str, list[str]]) -> None:
    import torch
    import torch.distributed as dist

    result: dict[str, Any] = {"rank": rank}
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        got = _train(name, True, late)
    except Exception as exc:  # noqa: BLE001 - the scenario reports what happened
        result.update(ok=False, error_type=f"{type(exc).__module__}.{type(exc).__name__}", error=str(exc)[:400])
        result["where"] = traceback.format_exc().splitlines()[-3:]
        result["traceback"] = traceback.format_exc()  # as Python prints it (the signature tests read it)
    else:
        ref = _train(name, False)
        diffs = [(a - b).abs().max().item() for ga, gb in zip(got["grads"], ref["grads"]) for a, b in zip(ga, gb)]
        result.update(
            ok=True,
            grads_equal=all(torch.equal(a, b) for ga, gb in zip(got["grads"], ref["grads"]) for a, b in zip(ga, gb))
            and got["losses"] == ref["losses"],
            max_abs_diff=max(diffs),
            losses=got["losses"],
        )
    result["states"] = _states()
    result["report"] = _report()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    # no destroy_process_group before the others are done: a failed rank may leave collectives unmatched
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str]) -> None:
    """``NAME WORLD [OPTIONS]``: run one scenario, print its result as one JSON line."""
    print(json.dumps(run_scenario(argv[0], int(argv[1]), _options(argv))))


def run_scenario(name: str, world: int, late: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Scenario ``name`` on ``world`` spawned gloo ranks; the result the module docstring describes."""
    import torch
    import torch.multiprocessing as mp

    late = late or {"late_apply": [], "late_revert": []}
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_rank, args=(world, _free_port(), name, out_dir, late), nprocs=world, join=True)
        ranks = [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(world)]
    failed = [r for r in ranks if not r["ok"]]
    out: dict[str, Any] = {"scenario": name, "world": world, "torch": torch.__version__, "ok": not failed}
    if failed:
        out.update({k: failed[0][k] for k in ("error_type", "error", "where", "traceback")})
    else:
        out["grads_equal"] = all(r["grads_equal"] for r in ranks)
        out["max_abs_diff"] = max(r["max_abs_diff"] for r in ranks)
        out["losses"] = ranks[0]["losses"]
    out["states"] = ranks[0]["states"]
    out["report"] = ranks[0]["report"]
    return out


def _outcome(name: str, error: str) -> Outcome:
    """Scenario ``name`` on one rank as an :class:`Outcome`: the bug observed where it raises
    ``error`` (the measure: the exception) or trains to other gradients than without checkpointing
    (the measure: the largest difference); not observed where all 3 steps' gradients and losses are
    bit-identical to training without checkpointing. Another failure means the reproduction broke."""
    r = run_scenario(name, 1)
    if not r["ok"]:
        if error not in r["error"]:
            raise RuntimeError(f"{name}: failed otherwise than the bug: {r['error_type']}: {r['error'][:300]}")
        return observed(f"{r['error_type'].rsplit('.', 1)[-1]}: {r['error'].splitlines()[0][:160]}")
    if not r["grads_equal"]:
        return observed(f"gradients differ from training without checkpointing (max abs diff {r['max_abs_diff']:.3g})")
    return not_observed("3 steps' gradients and losses bit-identical to training without checkpointing")


def cast() -> Outcome:
    """fsdp-recompute-cast's reproduction (pytorch#159359): scenario ``cast``, one gloo rank."""
    return _outcome("cast", "must have the same dtype")


def unshard() -> Outcome:
    """fsdp-recompute-unshard's reproduction (pytorch#187437): scenario ``unshard``, one gloo rank."""
    return _outcome("unshard", "got mixed torch.Tensor and DTensor")


if __name__ == "__main__":
    main(sys.argv[1:])
