"""Reproduction of pytorch PR #180666 (FSDP2 CPU offload + post-accumulate-grad hooks), one GPU.

FSDP2 with ``CPUOffloadPolicy(pin_memory=True)`` copies each reduced gradient to pinned CPU memory
with ``non_blocking=True`` in ``foreach_reduce`` and then runs the parameter's
``_post_accumulate_grad_hooks`` at once, on the CPU thread; the copy is waited for only in
``FSDPParamGroup.finalize_backward`` at the end of backward. A hook that reads ``param.grad``
(optimizer-in-backward) can read the pinned buffer before the copy has landed.

Each trial is one training step of an 8-layer MLP (4096 x 4096 fp32 weights, one ``fully_shard`` per
layer plus the root, world size 1, NCCL). A hook on every sharded parameter clones the CPU gradient
it is given; after ``backward()`` returns (the offload events are synchronized by then) the clone is
compared with the final ``param.grad``. Modes, each in its own process:

* ``pinned``: ``CPUOffloadPolicy(pin_memory=True)`` on the live torch (red where the bug is);
* ``pinned-patched``: the same with the patch idea: a wrapper around ``foreach_reduce`` (called by
  name from ``_fsdp_param_group``) that makes ``FSDPParam.pin_memory`` False, for the duration of
  the call, on parameters whose sharded parameter has post-accumulate-grad hooks (the only read of
  ``pin_memory`` inside ``foreach_reduce``; the other two reads are at sharding time);
* ``unpinned``: ``CPUOffloadPolicy(pin_memory=False)`` (the copy is blocking; control).

Usage: ``python repro_fsdp_offload_hook.py [--trials N]``; prints one JSON line per mode and a
summary, exit status 0 always (the JSON says red or green).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

LAYERS = 8
WIDTH = 4096
BATCH = 8192


def _patch_foreach_reduce() -> None:
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as group_mod

    original = group_mod.foreach_reduce

    def foreach_reduce(fsdp_params: list[Any], *args: Any, **kwargs: Any) -> Any:
        changed = []
        for fsdp_param in fsdp_params:
            hooks = getattr(fsdp_param.sharded_param, "_post_accumulate_grad_hooks", None)
            if fsdp_param.pin_memory and hooks:
                fsdp_param.pin_memory = False
                changed.append(fsdp_param)
        try:
            return original(fsdp_params, *args, **kwargs)
        finally:
            for fsdp_param in changed:
                fsdp_param.pin_memory = True

    group_mod.foreach_reduce = foreach_reduce


def child(mode: str, trials: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    mesh = init_device_mesh("cuda", (1,))
    if mode == "pinned-patched":
        _patch_foreach_reduce()
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH, bias=True) for _ in range(LAYERS)])
    policy = CPUOffloadPolicy(pin_memory=(mode != "unpinned"))
    for layer in model:
        fully_shard(layer, mesh=mesh, offload_policy=policy)
    fully_shard(model, mesh=mesh, offload_policy=policy)

    seen: dict[str, torch.Tensor] = {}
    names = {id(p): n for n, p in model.named_parameters()}

    def hook(param: torch.Tensor) -> None:
        # What an optimizer-in-backward step would read: the local CPU shard of the grad, now.
        seen[names[id(param)]] = param.grad._local_tensor.clone()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)

    results = []
    for trial in range(trials):
        seen.clear()
        model.zero_grad(set_to_none=True)
        x = torch.randn(BATCH, WIDTH, device="cuda", generator=None)
        model(x).square().mean().backward()
        torch.cuda.synchronize()
        bad = 0
        max_diff = 0.0
        for n, p in model.named_parameters():
            final = p.grad._local_tensor
            assert final.device.type == "cpu", final.device
            diff = (seen[n] - final).abs().max().item()
            max_diff = max(max_diff, diff)
            bad += int(diff != 0.0)
        results.append({"trial": trial, "params_stale": bad, "max_abs_diff": max_diff})
    dist.destroy_process_group()
    params = sum(1 for _ in model.parameters())
    return {
        "mode": mode,
        "torch": torch.__version__,
        "params": params,
        "trials": results,
        "trials_red": sum(1 for r in results if r["params_stale"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.trials)), flush=True)
        return
    summary = {}
    for mode in ("pinned", "pinned-patched", "unpinned"):
        proc = subprocess.run(
            [sys.executable, __file__, "--child", mode, "--trials", str(args.trials)],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if not lines:
            print(f"{mode}: rc={proc.returncode}\n{proc.stderr[-3000:]}")
            continue
        record = json.loads(lines[-1][len("RESULT ") :])
        print(json.dumps(record))
        summary[mode] = f"{record['trials_red']}/{len(record['trials'])} trials with stale hook grads"
    print("SUMMARY " + json.dumps(summary))


if __name__ == "__main__":
    main()
