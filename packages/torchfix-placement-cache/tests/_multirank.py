"""Multi-process CPU harness: real gloo process group, N ranks, one shared compile cache directory.

A test harness (not shipped in the wheel): used by the tests, ``demo.py`` and
``benchmarks/placement_cache_warm_start.py`` (which put this directory on ``sys.path``); never imported
by the fix itself. :func:`run_job` starts ``world`` interpreters (``python _multirank.py CONFIG``) that share ``TORCHINDUCTOR_CACHE_DIR`` and a
``file://`` rendezvous. The order is deterministic: rank 0 compiles first and fills the cache, a
barrier, then the other ranks compile (and may load rank 0's entry). Each rank prints one JSON line:
its local shape, the AOTAutograd / FX graph cache counter deltas of its compile
(``torch._dynamo.utils.counters``), the compile time of the first call, whether the compiled result
equals eager, the error (and its traceback) if the call raised, and the placement-cache fix's
``torchfix_core.report()`` row (``torchfix``: what it counted).

Scenarios (``scenario`` key of the config):

* ``uneven``: ``f(x) = x * 2 + 1`` on a global ``(10, 8)`` ``Shard(0)`` DTensor: local ``(3, 8)``
  on ranks 0-2, ``(1, 8)`` on rank 3 (world 4; world 2: global ``(3, 8)``, local ``(2, 8)``/``(1, 8)``).
* ``even``: same function, global ``(2 * world, 8)`` ``Shard(0)``: every rank holds ``(2, 8)``.
  With ``replicate_rank`` set, that rank then compiles the same function on a ``Replicate()``
  input of the same global shape (a placement change: must miss).
* any scenario with ``megacache=True``: private cache directory per rank, entries shipped from
  rank 0 through the mega-cache (``torch.compiler.save_cache_artifacts`` / ``load_cache_artifacts``).
* ``redistribute``: ``Replicate()`` -> ``Shard(0)`` inside the compiled function (the traced
  graph picks the rank's chunk; identical local input layout on every rank).

Hazard: 4 ranks on a 2-core box compile with ``TORCHINDUCTOR_COMPILE_THREADS=1``; keep the functions
tiny.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Mapping

_COUNTERS = (
    ("aot_autograd", "autograd_cache_hit"),
    ("aot_autograd", "autograd_cache_miss"),
    ("aot_autograd", "autograd_cache_bypass"),
    ("inductor", "fxgraph_cache_hit"),
    ("inductor", "fxgraph_cache_miss"),
)


def counter_snapshot() -> dict[str, int]:
    """The AOTAutograd / FX graph cache counters of this process (``torch._dynamo.utils.counters``)."""
    from torch._dynamo.utils import counters

    return {name: int(counters[group][name]) for group, name in _COUNTERS}


def counters_since(before: Mapping[str, int]) -> dict[str, int]:
    """What each cache counter of :func:`counter_snapshot` gained since ``before``."""
    after = counter_snapshot()
    return {k: after[k] - before[k] for k in after}


def placement_cache_state() -> str | None:
    """The placement-cache fix's state in this process (None: torchfix is not installed)."""
    try:
        import torchfix_core

        return next((r.state for r in torchfix_core.status() if r.id == "placement-cache"), None)
    except ImportError:
        return None


def fix_report() -> dict[str, Any]:
    """The placement-cache fix's row of ``torchfix_core.report()`` (state, acted, events) in this process."""
    from torchfix_core.testing import report_of

    return report_of("placement-cache")


def _compile_and_run(fn: Any, arg: Any, reference: Any, dynamic: bool | None = None) -> dict[str, Any]:
    """First call of a fresh ``torch.compile(fn)``: counters delta, time, correctness."""
    import torch

    before = counter_snapshot()
    compiled = torch.compile(fn, dynamic=dynamic)
    start = time.perf_counter()
    out: dict[str, Any] = {"ok": False, "error": None}
    try:
        result = compiled(arg)
        if hasattr(result, "to_local"):
            result = result.to_local()  # torch.equal on DTensors would run a collective
        out["ok"] = bool(torch.equal(result, reference))
        if not out["ok"]:
            out["error"] = "compiled result differs from eager"
    except Exception as exc:  # noqa: BLE001 - the harness reports whatever the compiled code raised
        out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        out["traceback"] = traceback.format_exc()[-6000:]  # as Python prints it (the signature tests)
    out["compile_s"] = round(time.perf_counter() - start, 4)
    out["counters"] = counters_since(before)
    return out


def uneven_rows(world: int) -> int:
    """Global rows of the ``uneven`` scenario: 10 on 4 ranks ((3, 3, 3, 1)), 3 on 2 ranks ((2, 1))."""
    return 10 if world == 4 else 2 * world - 1


def double_plus_one(x: Any) -> Any:
    """The compiled function of the ``uneven`` and ``even`` scenarios (and of the Redis job)."""
    return x * 2 + 1


def _redistribute_to_shard0(x: Any) -> Any:
    from torch.distributed.tensor import Shard

    return (x.redistribute(x.device_mesh, [Shard(0)]) * 2).to_local()


def _worker(config: Mapping[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    rank, world = int(config["rank"]), int(config["world"])
    if config.get("fix") == "api":
        import torchfix_core

        torchfix_core.apply(only=["placement-cache"])
    dist.init_process_group("gloo", init_method=config["init_method"], rank=rank, world_size=world)
    try:
        device = config.get("device") or "cpu"
        mesh = init_device_mesh(device, (world,))
        scenario = config["scenario"]
        report: dict[str, Any] = {"rank": rank, "scenario": scenario, "torch": torch.__version__}
        report["fix_state"] = placement_cache_state()

        if scenario == "redistribute":
            full = torch.arange(4 * world * 8, dtype=torch.float32, device=device).reshape(4 * world, 8)
            arg = DTensor.from_local(full.clone(), mesh, [Replicate()], run_check=False)
            fn = _redistribute_to_shard0
            reference = full.chunk(world, dim=0)[rank] * 2
        else:
            rows_global = uneven_rows(world) if scenario == "uneven" else 2 * world
            full = torch.arange(rows_global * 8, dtype=torch.float32, device=device).reshape(rows_global, 8)
            local = full.chunk(world, dim=0)[rank].contiguous()
            arg = DTensor.from_local(local, mesh, [Shard(0)], run_check=False, shape=full.shape, stride=full.stride())
            fn = double_plus_one
            reference = local * 2 + 1
        report["local_shape"] = list(arg.to_local().shape)

        mega = config.get("megacache_file")
        if rank == 0:
            report.update(_compile_and_run(fn, arg, reference, config.get("dynamic")))
            if mega:
                saved = torch.compiler.save_cache_artifacts()
                with open(mega, "wb") as fh:
                    fh.write(saved[0] if saved else b"")
        dist.barrier()
        if rank != 0:
            if mega:
                with open(mega, "rb") as fh:
                    blob = fh.read()
                info = torch.compiler.load_cache_artifacts(blob) if blob else None
                report["megacache_loaded"] = bool(info)
            report.update(_compile_and_run(fn, arg, reference, config.get("dynamic")))
            if config.get("replicate_rank") == rank:
                rep_full = full.clone()
                rep = DTensor.from_local(rep_full, mesh, [Replicate()], run_check=False)
                rep_ref = rep_full * 2 + 1
                torch._dynamo.reset()
                report["replicate"] = _compile_and_run(fn, rep, rep_ref)
        dist.barrier()
        report["torchfix"] = fix_report()
        return report
    finally:
        dist.destroy_process_group()


def run_job(
    scenario: str,
    *,
    fix: str = "auto",
    world: int = 4,
    cache_dir: str | None = None,
    env: Mapping[str, str] | None = None,
    replicate_rank: int | None = None,
    megacache: bool = False,
    dynamic: bool | None = None,
    device: str = "cpu",
    timeout: float = 600,
) -> list[dict[str, Any]]:
    """Run one ``world``-rank job; return the per-rank reports sorted by rank.

    ``fix``: ``"auto"`` leaves torchfix as the environment configures it (autoload at ``import
    torch``); ``"off"`` runs with ``TORCHFIX_AUTOLOAD=0`` (no fix at all); ``"api"`` runs with
    ``TORCHFIX_AUTOLOAD=0`` and calls ``torchfix_core.apply(only=["placement-cache"])`` first (this
    fix alone, isolated from the other installed fixes). ``env`` is added to every rank's
    environment (e.g. ``{"TORCHFIX_DISABLE": "placement-cache"}``). ``megacache=True`` gives every
    rank its own cache directory instead; rank 0 ships its entries to the others through
    ``torch.compiler.save_cache_artifacts()`` / ``load_cache_artifacts()``. ``dynamic`` is passed
    to ``torch.compile``. ``device="cuda"`` puts every rank on ``cuda:0`` (``CUDA_VISIBLE_DEVICES=0``:
    the same device index on every rank, as on several hosts sharing one cache). ``cache_dir`` defaults to a fresh temporary directory. Raises
    ``RuntimeError`` with every rank's output when a rank exits non-zero or prints no report.
    """
    owned = None
    if cache_dir is None:
        owned = tempfile.TemporaryDirectory(prefix="torchfix-pc-")
        cache_dir = owned.name
    rendezvous = tempfile.mkdtemp(prefix="torchfix-pc-pg-")
    child_env = dict(os.environ)
    child_env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    child_env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    child_env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    if fix in ("off", "api"):
        child_env["TORCHFIX_AUTOLOAD"] = "0"
    elif fix != "auto":
        raise ValueError(f"fix must be 'auto', 'off' or 'api', not {fix!r}")
    if device == "cuda":
        child_env["CUDA_VISIBLE_DEVICES"] = child_env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    child_env.update(env or {})
    try:
        configs, envs = [], []
        for rank in range(world):
            rank_env = child_env
            if megacache:
                rank_env = {**child_env, "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, f"rank{rank}")}
            configs.append(
                {
                    "scenario": scenario,
                    "rank": rank,
                    "world": world,
                    "init_method": f"file://{rendezvous}/store",
                    "replicate_rank": replicate_rank,
                    "fix": fix,
                    "dynamic": dynamic,
                    "device": device,
                    "megacache_file": os.path.join(rendezvous, "mega.bin") if megacache else None,
                }
            )
            envs.append(rank_env)
        return launch_ranks(os.path.abspath(__file__), configs, envs, f"{scenario!r} job", timeout)
    finally:
        if owned is not None:
            owned.cleanup()
        import shutil

        shutil.rmtree(rendezvous, ignore_errors=True)


def launch_ranks(
    script: str, configs: list[dict[str, Any]], envs: list[dict[str, str]], what: str, timeout: float
) -> list[dict[str, Any]]:
    """Start ``python script CONFIG`` once per rank (config and environment each), wait for all of
    them, and return each rank's last JSON line, by rank. Raises ``RuntimeError`` with every rank's
    output when a rank exits non-zero or prints no report; kills the others on a timeout."""
    procs = [
        subprocess.Popen(
            [sys.executable, script, json.dumps(config)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for config, env in zip(configs, envs)
    ]
    outputs = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        outputs.append((proc.returncode, stdout, stderr))
    reports = []
    for rank, (code, stdout, _stderr) in enumerate(outputs):
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if code != 0 or not lines:
            dump = "\n".join(f"--- rank {r} exit {c}\n{o}\n{e[-3000:]}" for r, (c, o, e) in enumerate(outputs))
            raise RuntimeError(f"rank {rank} of the {what} failed:\n{dump}")
        reports.append(json.loads(lines[-1]))
    return sorted(reports, key=lambda r: r["rank"])


def main(argv: list[str]) -> int:
    report = _worker(json.loads(argv[0]))
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
