"""fsdp-offload-hook's reproduction (``FixSpec.reproduction``: :func:`offload_hook`), and the
scenario behind it (:func:`run_race`).

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
GPU tests and its demo run; imported only when a reproduction runs (it imports torch inside its
functions). It wants a fresh interpreter: it makes this process rank 0 of a world of one
(:func:`init_one_rank`).

The case, upstream PR pytorch/pytorch#180666's race: 8 x ``Linear(4096, 4096)`` fp32 on one CUDA
GPU, each ``fully_shard``-ed with ``CPUOffloadPolicy(pin_memory=True)``, plus the root; batch 8192,
``torch.manual_seed(0)``. A post-accumulate-grad hook on every parameter clones the CPU gradient
shard it is handed (what an optimizer in backward reads); after ``backward()`` and a device
synchronize each clone is compared bytewise with the final ``param.grad``. Without the fix (torch
2.8-2.12) ``foreach_reduce`` runs the hooks before its non-blocking device-to-host copy has landed:
the hooks read stale bytes. Torch 2.13+ carries upstream's guard.
"""

from __future__ import annotations

import socket
from typing import Any

from torchfix_core.reproduction import Outcome, cannot_run, not_observed, observed

#: steps of the case (each a fresh backward, gradients set to ``None`` before it)
TRIALS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_one_rank(backend: str) -> None:
    """Make this process rank 0 of a default process group of world size 1 (``backend``; TCP
    rendezvous on a free local port)."""
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)


def run_race(trials: int = TRIALS) -> dict[str, Any]:
    """The case of the module docstring in this interpreter (one CUDA GPU, NCCL): ``torch``,
    ``device``, ``params`` (hooked parameters) and ``trials``: per step, ``stale`` (how many hooks
    read other bytes than the final gradient) and ``max_abs_diff`` (the largest difference)."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    torch.cuda.set_device(0)
    init_one_rank("nccl")
    try:
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
            seen[names[id(param)]] = param.grad._local_tensor.clone()  # type: ignore[union-attr]

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
                final = p.grad._local_tensor  # type: ignore[union-attr]
                if final.device.type != "cpu":
                    raise RuntimeError(f"{n}'s gradient is on {final.device}, not offloaded to the CPU")
                stale += int(not torch.equal(seen[n], final))
                max_diff = max(max_diff, float((seen[n] - final).abs().max()))
            results.append({"stale": stale, "max_abs_diff": max_diff})
    finally:
        dist.destroy_process_group()
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "params": len(names),
        "trials": results,
    }


def _missing() -> str | None:
    """What this machine lacks for the case (``None``: nothing)."""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is false): the race is between a device-to-host copy and the CPU thread"
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        return "this torch has no NCCL backend (torch.distributed.is_nccl_available() is false)"
    try:
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard  # noqa: F401
    except ImportError:
        return "this torch has no FSDP2 (torch.distributed.fsdp.fully_shard, CPUOffloadPolicy)"
    return None


def offload_hook() -> Outcome:
    """fsdp-offload-hook's reproduction (pytorch PR #180666): :func:`run_race` with
    :data:`TRIALS` steps. The bug observed where some hook read bytes differing from the final
    gradient (the measure: how many hooks, per step, and the largest difference); not observed where
    every hook's clone equals the final gradient bytewise in every step. Cannot run without a CUDA
    GPU and NCCL."""
    missing = _missing()
    if missing is not None:
        return cannot_run(missing)
    r = run_race()
    stale = [t["stale"] for t in r["trials"]]
    diff = max(t["max_abs_diff"] for t in r["trials"])
    compared = (
        f"{r['params']} post-accumulate-grad hooks' copies of their CPU gradient against the final one, "
        f"{len(stale)} steps"
    )
    if any(stale):
        per_step = ", ".join(map(str, stale))
        return observed(f"{compared}: stale in {per_step} of {r['params']} per step, max abs diff {diff:.3g}")
    return not_observed(f"{compared}: bytewise equal in every step (max abs diff {diff:.3g})")
