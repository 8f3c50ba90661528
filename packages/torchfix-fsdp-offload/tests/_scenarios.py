"""Scenarios of the fsdp-offload-hook tests: ``python _scenarios.py NAME [OPTIONS]``, one JSON line.

Each runs in the fresh interpreter the test started (torchfix activated at ``import torch`` from
the environment the test set), as one rank of a world-size-1 process group (TCP rendezvous on a
free local port), ``torch.manual_seed(0)``. Every result has ``torch``, ``states`` (the fix's state)
and ``report`` (``report_of``: state, ``acted``, events of the fix at the end).

* ``states``: the fix's state after ``import torch`` and after ``import torch.distributed.fsdp``
  (the trigger), and whether ``_fsdp_param_group.foreach_reduce`` is then a torchfix wrapper.
* ``flip`` (CPU, gloo): what the post-accumulate-grad hooks see of ``FSDPParam.pin_memory``.
  ``Linear(8, 8)``, ReLU, ``Linear(8, 8)``, ``fully_shard`` on both linears and the root with
  ``CPUOffloadPolicy(pin_memory=False)``; after the first forward (its lazy init pins sharded
  parameters where ``pin_memory`` is set, which a CPU-only torch cannot do) every ``FSDPParam``
  gets ``pin_memory = True``: the state ``CPUOffloadPolicy(pin_memory=True)`` gives on a GPU
  machine. Hooks on ``0.weight`` and ``2.bias`` record every parameter's ``pin_memory`` when they
  run (inside ``foreach_reduce``); two backward steps, the second accumulating into the first's
  gradients. Also ``after`` (each step's ``pin_memory`` after backward) and ``grad_sums``.
  Options: ``--late-apply`` (run with ``TORCHFIX_AUTOLOAD=0``): shard first, then
  ``torchfix_core.apply(only=[fix])``; ``--late-revert``: shard with the fix applied, then revert it.
* ``gpu`` (one CUDA GPU, NCCL): pytorch PR #180666's race. 8 x ``Linear(4096, 4096)`` fp32, each
  ``fully_shard``-ed with ``CPUOffloadPolicy(pin_memory=True)`` plus the root, batch 8192; a hook on
  every parameter clones the CPU gradient shard it is handed (what an optimizer in backward
  reads), compared bytewise with the final ``param.grad`` after ``backward()`` and a device
  synchronize. ``--trials N`` (default 3) steps; per trial the number of parameters whose hook saw
  other bytes (``stale``) and the largest absolute difference.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from typing import Any

FIX = "fsdp-offload-hook"
MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param_group"


def _state() -> str:
    try:
        import torchfix_core
    except ImportError:
        return "absent"
    return next((str(r.state) for r in torchfix_core.status() if r.id == FIX), "absent")


def _report() -> dict[str, Any]:
    try:
        from torchfix_core.testing import report_of
    except ImportError:
        return {"state": "absent", "acted": 0, "events": {}}
    return report_of(FIX)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init(backend: str) -> None:
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)


def _fsdp_params(module: Any) -> list[Any]:
    """The ``FSDPParam``s of one ``fully_shard``-ed module (a test harness: private attributes)."""
    state = module._get_fsdp_state()
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:  # torch 2.8-2.11: one group per state
        groups = [state._fsdp_param_group]
    return [p for g in groups if g is not None for p in g.fsdp_params]


def states() -> dict[str, Any]:
    import importlib
    import sys as _sys

    import torch

    before = _state()
    imported_early = MODULE in _sys.modules
    import torch.distributed.fsdp  # noqa: F401

    module = importlib.import_module(MODULE)
    return {
        "torch": torch.__version__,
        "before_trigger": before,
        "trigger_imported_by_import_torch": imported_early,
        "after_trigger": _state(),
        "wrapped": getattr(module.foreach_reduce, "__torchfix_fix__", None) == FIX,
    }


def flip(argv: list[str]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    _init("gloo")
    mesh = init_device_mesh("cpu", (1,))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    policy = CPUOffloadPolicy(pin_memory=False)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh, offload_policy=policy)
    fully_shard(model, mesh=mesh, offload_policy=policy)
    if "--late-apply" in argv or "--late-revert" in argv:
        import torchfix_core

        (torchfix_core.apply if "--late-apply" in argv else torchfix_core.revert)(only=[FIX])
    by_param = {id(p.sharded_param): p for layer in (model[0], model[2]) for p in _fsdp_params(layer)}
    names = {id(p): n for n, p in model.named_parameters()}
    assert set(by_param) == set(names), "every parameter is an FSDPParam's sharded parameter"
    seen: list[dict[str, Any]] = []
    step = 0

    def hook(param: torch.Tensor) -> None:
        pins = {names[i]: fp.pin_memory for i, fp in by_param.items()}
        seen.append({"step": step, "param": names[id(param)], "pin": pins})

    model[0].weight.register_post_accumulate_grad_hook(hook)
    model[2].bias.register_post_accumulate_grad_hook(hook)
    after = []
    for step in range(2):  # step 1 accumulates into step 0's gradients
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step))
        loss = model(x).sum()
        if step == 0:
            for fp in by_param.values():  # what CPUOffloadPolicy(pin_memory=True) sets on a GPU machine
                fp.pin_memory = True
        loss.backward()
        after.append({names[i]: fp.pin_memory for i, fp in by_param.items()})
    grad_sums = {n: float(p.grad.to_local().double().sum()) for n, p in model.named_parameters()}
    dist.destroy_process_group()
    return {"torch": torch.__version__, "hooks": seen, "after": after, "grad_sums": grad_sums}


def gpu(argv: list[str]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    trials = int(argv[argv.index("--trials") + 1]) if "--trials" in argv else 3
    torch.cuda.set_device(0)
    _init("nccl")
    mesh = init_device_mesh("cuda", (1,))
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(8)])
    policy = CPUOffloadPolicy(pin_memory=True)
    for layer in model:
        fully_shard(layer, mesh=mesh, offload_policy=policy)
    fully_shard(model, mesh=mesh, offload_policy=policy)
    seen: dict[str, torch.Tensor] = {}
    names = {id(p): n for n, p in model.named_parameters()}

    def hook(param: torch.Tensor) -> None:
        # what an optimizer-in-backward step reads: the local CPU shard of the gradient, now
        seen[names[id(param)]] = param.grad._local_tensor.clone()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    results = []
    for _ in range(trials):
        seen.clear()
        model.zero_grad(set_to_none=True)
        model(torch.randn(8192, 4096, device="cuda")).square().mean().backward()
        torch.cuda.synchronize()
        stale, max_diff = 0, 0.0
        for n, p in model.named_parameters():
            final = p.grad._local_tensor
            assert final.device.type == "cpu", final.device
            stale += int(not torch.equal(seen[n], final))
            max_diff = max(max_diff, (seen[n] - final).abs().max().item())
        results.append({"stale": stale, "max_abs_diff": max_diff})
    dist.destroy_process_group()
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "params": len(names),
        "trials": results,
        "trials_red": sum(1 for r in results if r["stale"]),
    }


def main(argv: list[str]) -> None:
    name = argv[0]
    try:
        out = {"states": states, "flip": lambda: flip(argv[1:]), "gpu": lambda: gpu(argv[1:])}[name]()
        out["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the scenario reports what happened
        out = {"ok": False, "error_type": f"{type(exc).__module__}.{type(exc).__name__}", "error": str(exc)[:400]}
        out["traceback"] = traceback.format_exc()
    out.update(scenario=name, state=_state(), report=_report())
    if "torch" not in out:
        import torch

        out["torch"] = torch.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    main(sys.argv[1:])
