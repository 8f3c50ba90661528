"""Multi-"host" training steps sharing Inductor's remote caches through a real Redis server.

Test harness (never imported by the fix); the tests start the server with the kit's
:class:`torchfix_core.reproduction.RedisServer`. :func:`run_redis_job` starts ``world`` rank interpreters (``python _redis_cache_job.py CONFIG``)
joined by a real gloo process group (``file://`` rendezvous). Each rank has its **own**
``TORCHINDUCTOR_CACHE_DIR``, so the only way one rank can reuse another's compiled artifact is the
remote cache: ``TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1``, ``TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1``,
``TORCHINDUCTOR_REDIS_HOST`` / ``TORCHINDUCTOR_REDIS_PORT`` (read by
``torch/_inductor/remote_cache.py``'s ``RedisRemoteCacheBackend``, torch 2.13 and 2.15). That is
the multi-host form of the placement-cache bug: every rank runs on the same device index (CPU), so
torch 2.14's device term in the DTensor key (pytorch/pytorch#188401) does not separate them.

Each rank trains a ``Shard(0)`` DTensor parameter for a few SGD steps with a compiled
``f(w) = w * 2 + 1`` (forward and backward through AOTAutograd) and checks the loss, output and
gradient of every step bit for bit against the same steps in eager mode (the values are small
binary fractions, so both are exact). Order: rank 0 compiles first and fills the caches, barrier,
then the other ranks compile. Each rank prints one JSON line: its local shape, the AOTAutograd /
FX graph cache counter deltas of its first step (``torch._dynamo.utils.counters``: with a private
local directory, every hit came from Redis), whether every step matched eager, and the error if a
step raised.

Scenarios: ``uneven``: global ``(10, 8)`` on 4 ranks (local ``(3, 8)`` on ranks 0-2, ``(1, 8)`` on
rank 3); ``even``: global ``(2 * world, 8)``, every rank ``(2, 8)``.

Hazard: several interpreters on a 2-core box: ``TORCHINDUCTOR_COMPILE_THREADS=1``, tiny graphs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Mapping

from _multirank import (
    counter_snapshot,
    counters_since,
    double_plus_one,
    launch_ranks,
    placement_cache_state,
    uneven_rows,
)

STEPS = 3


def _train(param: Any, fn: Any, steps: int) -> list[tuple[Any, Any, Any]]:
    """``steps`` SGD steps of ``loss = sum(fn(w).to_local() ** 2)``: (loss, output, grad) per step."""
    import torch

    out = []
    for _ in range(steps):
        param.grad = None
        y = fn(param).to_local()
        loss = (y * y).sum()
        loss.backward()
        grad = param.grad.to_local().clone()
        out.append((loss.detach().clone(), y.detach().clone(), grad))
        with torch.no_grad():
            param.to_local().sub_(grad / 64)  # 1/64: the values stay exact binary fractions
    return out


def _worker(config: Mapping[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    rank, world = int(config["rank"]), int(config["world"])
    if config["fix"] == "api":
        import torchfix_core

        torchfix_core.apply(only=["placement-cache"])
    dist.init_process_group("gloo", init_method=config["init_method"], rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        rows = uneven_rows(world) if config["scenario"] == "uneven" else 2 * world
        full = torch.arange(rows * 8, dtype=torch.float32).reshape(rows, 8) / 8
        local = full.chunk(world, dim=0)[rank].contiguous()

        def parameter() -> Any:
            dt = DTensor.from_local(
                local.clone(), mesh, [Shard(0)], run_check=False, shape=full.shape, stride=full.stride()
            )
            return torch.nn.Parameter(dt)

        report: dict[str, Any] = {"rank": rank, "scenario": config["scenario"], "torch": torch.__version__}
        report["local_shape"] = list(local.shape)
        report["fix_state"] = placement_cache_state()
        reference = _train(parameter(), double_plus_one, STEPS)

        def compiled_steps() -> None:
            before = counter_snapshot()
            start = time.perf_counter()
            report.update(ok=False, error=None)
            try:
                got = _train(parameter(), torch.compile(double_plus_one), STEPS)
                same = all(torch.equal(a, b) for g, r in zip(got, reference) for a, b in zip(g, r))
                report["ok"] = same
                report["losses"] = [float(g[0]) for g in got]
                if not same:
                    report["error"] = "compiled steps differ from eager"
            except Exception as exc:  # noqa: BLE001 - the harness reports whatever the compiled step raised
                report["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            report["compile_s"] = round(time.perf_counter() - start, 3)
            report["counters"] = counters_since(before)

        if rank == 0:
            compiled_steps()
        dist.barrier()
        if rank != 0:
            compiled_steps()
        dist.barrier()
        return report
    finally:
        dist.destroy_process_group()


def run_redis_job(
    scenario: str,
    *,
    port: int,
    fix: str,
    world: int = 4,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> list[dict[str, Any]]:
    """Run one ``world``-rank job against the Redis server on ``127.0.0.1:port``; reports by rank.

    ``fix``: ``"off"`` (``TORCHFIX_AUTOLOAD=0``: no fix) or ``"api"`` (``TORCHFIX_AUTOLOAD=0`` then
    ``torchfix_core.apply(only=["placement-cache"])``). Every rank gets a fresh private
    ``TORCHINDUCTOR_CACHE_DIR``. Raises ``RuntimeError`` with every rank's output when a rank
    exits non-zero or prints no report.
    """
    if fix not in ("off", "api"):
        raise ValueError(f"fix must be 'off' or 'api', not {fix!r}")
    scratch = tempfile.mkdtemp(prefix="torchfix-redis-job-")
    base = dict(os.environ)
    base.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    base.pop("TORCHINDUCTOR_REDIS_URL", None)  # would take precedence over host/port
    base.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    base.update(
        TORCHFIX_AUTOLOAD="0",
        TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE="1",
        TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE="1",
        TORCHINDUCTOR_REDIS_HOST="127.0.0.1",
        TORCHINDUCTOR_REDIS_PORT=str(port),
    )
    base.update(env or {})
    try:
        configs = [
            {"scenario": scenario, "rank": rank, "world": world, "fix": fix, "init_method": f"file://{scratch}/store"}
            for rank in range(world)
        ]
        envs = [
            {**base, "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, f"inductor-rank{rank}")} for rank in range(world)
        ]
        return launch_ranks(os.path.abspath(__file__), configs, envs, f"{scenario!r} job", timeout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_worker(json.loads(sys.argv[1]))) + "\n")
    sys.stdout.flush()
