"""Reproductions of pytorch/pytorch#175258 (one per process): the scenarios behind sac-storage-key's
declared reproduction (:func:`torchfix_sac_replay.reproduction.sac_storage_key`: ``upstream``), the
tests and the demo. Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine
what the package's tests run; it imports torch inside its functions only.

``python -m torchfix_sac_replay.reproduction_sac_storage_key NAME`` prints one JSON line: ``fix``
(the fix's state), ``ok``, ``error_type`` / ``error`` / ``traceback`` when the checkpointed backward
raised, the checks each scenario makes, and ``report`` (the fix's row of ``torchfix_core.report()``:
``acted``, events).

* ``upstream``: upstream's regression test ``test_sac_cached_value_fifo_mismatch``
  (``test/dynamo/test_wrap_inductor_compiled_regions.py``, PR #183080) line for line: a fake process
  group, a 1-rank CPU mesh, a compiled ``arange`` cached in a dict, a compiled DTensor function that
  reads it, SAC saving ``inductor_compiled_code``. Its assertion is that backward completes; the
  scenario also compares the gradient with the same program run without checkpointing.
* ``silent``: plain tensors, two compiled regions whose outputs have the same count, shapes and
  dtype; the region skipped in the recompute is popped instead of the other one, which gives a wrong
  gradient and no error.
* ``replay``: no compiler; two ``inductor_compiled_code`` regions recorded by SAC, only the second
  replayed. ``mixes_regions`` says whether the replay returned the first one's output: the tests'
  own live check of the bug (independent of the fix's probe). ``replay_recompute``: the same under a
  policy that recomputes every op (the report's counter counts region calls whatever the policy).
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from typing import Any, Callable

FIX_ID = "sac-storage-key"


def _fix_state() -> str:
    import torchfix_core

    return str(next(r.state for r in torchfix_core.status() if r.id == "sac-storage-key"))


def _policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    import torch
    from torch.utils.checkpoint import CheckpointPolicy

    # upstream's policy: save every compiled region, recompute the rest
    if isinstance(op, torch._ops.HigherOrderOperator):
        if op.name() == "inductor_compiled_code":
            return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _checkpointed_backward(outer_fn: Callable[[Any], Any], x: Any) -> None:
    from torch._inductor import config as inductor_config
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    context_fn = functools.partial(create_selective_checkpoint_contexts, _policy)
    with inductor_config.patch({"wrap_inductor_compiled_regions": True}):
        out = checkpoint(outer_fn, x, use_reentrant=False, context_fn=context_fn)
        out.sum().backward()


def upstream() -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    from torch.testing._internal.distributed.fake_pg import FakeStore

    fake_store = FakeStore()
    dist.init_process_group(backend="fake", store=fake_store, rank=0, world_size=1)
    result: dict[str, Any] = {}
    try:
        mesh = init_device_mesh("cpu", mesh_shape=(1,), mesh_dim_names=("dp",))

        @torch.compile(dynamic=False, fullgraph=True)
        def compute_int_stuff(n: int) -> torch.Tensor:
            return torch.arange(n, dtype=torch.int32)

        @torch.compile(dynamic=False, fullgraph=True)
        def compute_float(q: Any, cached_ints: torch.Tensor) -> Any:
            ql = q.to_local()
            out = ql * cached_ints.float().sum()
            return DTensor.from_local(out, device_mesh=q.device_mesh, placements=q.placements)

        _cache: dict[str, torch.Tensor] = {}

        def outer_fn(x: Any) -> Any:
            # Forward: cache miss, compute_int_stuff runs as inductor_compiled_code.
            # Recompute: cache hit, compute_int_stuff is skipped; only compute_float runs.
            if "data" not in _cache:
                _cache["data"] = compute_int_stuff(x.shape[-1])
            return compute_float(x, _cache["data"])

        torch.manual_seed(0)
        local = torch.randn(4, 4, dtype=torch.float32, requires_grad=True)
        x = DTensor.from_local(local, mesh, (Replicate(),))
        try:
            _checkpointed_backward(outer_fn, x)
        except Exception as exc:  # noqa: BLE001 - the reproduction reports what torch raised
            result.update(ok=False, error_type=f"{type(exc).__module__}.{type(exc).__name__}", error=str(exc))
            result["traceback"] = traceback.format_exc()
            return result
        # d(sum(x * sum(arange(4))))/dx = 6 everywhere: the un-checkpointed program's gradient
        expected = torch.full((4, 4), 6.0)
        result.update(
            ok=True,
            grad_match=bool(torch.equal(local.grad, expected)),
            grad_error=float((local.grad - expected).abs().max()),
        )
        return result
    finally:
        dist.destroy_process_group()


def silent() -> dict[str, Any]:
    import torch

    @torch.compile(dynamic=False, fullgraph=True)
    def make_pair(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return t * 2, t * 3

    @torch.compile(dynamic=False, fullgraph=True)
    def scale(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return x * c

    _cache: dict[str, torch.Tensor] = {}

    def outer_fn(x: torch.Tensor) -> torch.Tensor:
        if "c" not in _cache:
            _cache["c"] = make_pair(x.detach())[0]
        return scale(x, _cache["c"])

    torch.manual_seed(0)
    x = torch.randn(4, 4, requires_grad=True)
    expected = x.detach() * 2  # d(sum(x * c))/dx = c = 2x
    try:
        _checkpointed_backward(outer_fn, x)
    except Exception as exc:  # noqa: BLE001 - the reproduction reports what torch raised
        return {
            "ok": False,
            "error_type": f"{type(exc).__module__}.{type(exc).__name__}",
            "error": str(exc),
            "traceback": traceback.format_exc(),
        }
    assert x.grad is not None
    return {
        "ok": True,
        "grad_match": bool(torch.allclose(x.grad, expected)),
        "grad_error": float((x.grad - expected).abs().max()),
    }


def _recompute_every_op(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.PREFER_RECOMPUTE


def replay() -> dict[str, Any]:
    """Two regions recorded by SAC under upstream's policy (save them), the second replayed."""
    return _replay(_policy)


def replay_recompute() -> dict[str, Any]:
    """The same under a policy that recomputes every op, the regions too."""
    return _replay(_recompute_every_op)


def _replay(policy: Callable[..., Any]) -> dict[str, Any]:
    import torch
    import torch._higher_order_ops.wrap as wrap
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    hop = getattr(wrap, "inductor_compiled_code", None)
    if hop is None:  # torch 2.8/2.9: no such HOP, so no compiled region reaches SAC as one op
        return {"ok": True, "replayed": None, "mixes_regions": False, "hop": False}
    # 2.12+: the HOP takes an InductorCompiledCallable (unique .idx); 2.10/2.11: the bare callable
    make = getattr(wrap, "InductorCompiledCallable", lambda fn: fn)
    first, second = make(lambda inputs: (inputs[0] + 1,)), make(lambda inputs: (inputs[0] + 2,))
    caching, cached = create_selective_checkpoint_contexts(policy)
    x = torch.zeros(1)
    with caching:
        hop(first, [x])
        hop(second, [x])
    with cached:
        (out,) = hop(second, [x])
    return {"ok": True, "replayed": out.item(), "mixes_regions": out.item() != 2.0}


SCENARIOS = {"upstream": upstream, "silent": silent, "replay": replay, "replay_recompute": replay_recompute}


def run_scenario(name: str) -> dict[str, Any]:
    """Scenario ``name`` in this interpreter: its result, with the fix's state, torch's version and
    the fix's report row (the JSON object the module docstring describes)."""
    import torch
    import torch._dynamo  # noqa: F401 - the fix's trigger: applied (or not) before the scenario runs

    result = SCENARIOS[name]()
    result["fix"] = _fix_state()
    result["torch"] = torch.__version__
    from torchfix_core.testing import report_of

    result["report"] = report_of(FIX_ID)
    return result


def main(argv: list[str]) -> int:
    """``NAME``: run one scenario, print its result as one JSON line."""
    print(json.dumps(run_scenario(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
