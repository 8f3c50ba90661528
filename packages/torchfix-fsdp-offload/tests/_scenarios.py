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
The GPU race itself is the fix's declared reproduction, shipped in the wheel
(``torchfix_fsdp_offload.reproduction``), which ``test_gpu.py`` and the demo run.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from torchfix_fsdp_offload.reproduction import init_one_rank

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

    init_one_rank("gloo")
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


def main(argv: list[str]) -> None:
    name = argv[0]
    try:
        out = {"states": states, "flip": lambda: flip(argv[1:])}[name]()
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
