"""The reproductions of placement-cache, aot-bypass-key, aot-autocast-key and aot-hop-body-key
(``FixSpec.reproduction``: :func:`placement`, :func:`bypass`, :func:`autocast`, :func:`hop_body`),
and the scenarios behind them: ``python -m torchfix_placement_cache.reproduction NAME [ARG]``.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests, its demo and the combination suite run; imported only when a reproduction runs (it imports
torch inside its functions). All four bugs are compile caches serving a wrong artifact; each
reproduction fills a private, temporary ``TORCHINDUCTOR_CACHE_DIR`` (never the user's) and reports
what was served wrongly.

Each scenario runs in a fresh interpreter (the tests pick the fix states through ``only_fix`` and
the cache directory through ``TORCHINDUCTOR_CACHE_DIR``) and prints one JSON line last: the
scenario's facts, the AOTAutograd and FX graph cache counters, the states of the fixes and their
``report()`` rows (``reports``: what each fix counted). Backend ``inductor`` on CPU: the AOTAutograd
cache is used only there.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Iterator, Mapping

from torchfix_core.reproduction import Outcome, not_observed, observed

MODULE = "torchfix_placement_cache.reproduction"
FIX_IDS = ("aot-autocast-key", "aot-hop-body-key", "aot-bypass-key", "placement-cache")


def fix_states() -> dict[str, str]:
    import torchfix_core

    return {r.id: str(r.state) for r in torchfix_core.status() if r.id in FIX_IDS}


def fix_reports() -> dict[str, dict[str, Any]]:
    """Each fix's row of ``torchfix_core.report()`` (state, acted, events) at the end of the scenario."""
    from torchfix_core.testing import report_of

    return {fix_id: report_of(fix_id) for fix_id in FIX_IDS}


def cache_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    aot = {k: int(v) for k, v in counters["aot_autograd"].items() if k.startswith("autograd_cache")}
    fx = {k: int(v) for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
    return {**aot, **fx}


def close(a: Any, b: Any) -> bool:
    """Equal up to Inductor's reassociation (1e-5 relative); a stale artifact is off by 50% or a dtype."""
    import torch

    return bool(a.dtype == b.dtype and torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-5))


def _max_abs_diff(a: Any, b: Any) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float((a.detach().float() - b.detach().float()).abs().max())


@contextlib.contextmanager
def private_cache() -> Iterator[str]:
    """A fresh, temporary ``TORCHINDUCTOR_CACHE_DIR`` for this interpreter (Inductor reads the
    variable at every use), with the FX graph and AOTAutograd caches on, whatever the environment
    says; the variable and the configuration are restored after."""
    import torch

    inductor = {
        k: v
        for k, v in (("force_disable_caches", False), ("fx_graph_cache", True))
        if hasattr(torch._inductor.config, k)
    }
    functorch = {"enable_autograd_cache": True} if hasattr(torch._functorch.config, "enable_autograd_cache") else {}
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="torchfix-repro-cache-") as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        try:
            with torch._inductor.config.patch(inductor), torch._functorch.config.patch(functorch):
                yield cache
        finally:
            if previous is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


def _child_env(cache_dir: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env.update(extra)
    return env


def _last_json(proc: subprocess.CompletedProcess[str] | tuple[int, str, str], what: str) -> dict[str, Any]:
    code, stdout, stderr = proc if isinstance(proc, tuple) else (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if code != 0 or not lines:
        raise RuntimeError(f"{what} exited {code} without a result:\n{stdout[-2000:]}\n{stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def run_child(scenario: str, arg: str, cache_dir: str, timeout: float = 600, **env: str) -> dict[str, Any]:
    """``python -m torchfix_placement_cache.reproduction SCENARIO ARG`` in a fresh interpreter with
    this one's environment, ``cache_dir`` as its ``TORCHINDUCTOR_CACHE_DIR`` and ``env``."""
    proc = subprocess.run(
        [sys.executable, "-m", MODULE, scenario, arg],
        env=_child_env(cache_dir, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return _last_json(proc, f"scenario {scenario} {arg}")


# --- placement-cache ------------------------------------------------------------------------------


def double_plus_one(x: Any) -> Any:
    """The function the ranks compile."""
    return x * 2 + 1


def uneven_rank(config_json: str) -> dict[str, Any]:
    """One rank of :func:`uneven_job` (its config as JSON): ``x * 2 + 1`` compiled on a global
    ``(2 * world - 1, 8)`` ``Shard(0)`` DTensor (rank 0 holds ``(2, 8)``, the last rank ``(1, 8)``);
    rank 0 compiles first and fills the shared cache, then the others. The rank's local shape, its
    AOTAutograd cache counters, whether the output equals eager, and the error if the call raised."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    config = json.loads(config_json)
    rank, world = int(config["rank"]), int(config["world"])
    dist.init_process_group("gloo", init_method=config["init_method"], rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        rows = 2 * world - 1
        full = torch.arange(rows * 8, dtype=torch.float32).reshape(rows, 8)
        local = full.chunk(world, dim=0)[rank].contiguous()
        arg = DTensor.from_local(local, mesh, [Shard(0)], run_check=False, shape=full.shape, stride=full.stride())
        out: dict[str, Any] = {"rank": rank, "local_shape": list(local.shape), "ok": False, "error": None}
        if rank != 0:
            dist.barrier()  # rank 0 has compiled
        before = cache_counters()
        try:
            result = torch.compile(double_plus_one)(arg).to_local()  # torch.equal on a DTensor would communicate
            out["max_abs_diff"] = _max_abs_diff(result, local * 2 + 1)
            out["ok"] = bool(torch.equal(result, local * 2 + 1))
            if not out["ok"]:
                out["error"] = "compiled result differs from eager"
        except Exception as exc:  # noqa: BLE001 - a stale artifact fails in Inductor's size assert
            out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        after = cache_counters()
        out["aot"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        if rank == 0:
            dist.barrier()
        dist.barrier()
        return out
    finally:
        dist.destroy_process_group()


def run_ranks(argvs: list[list[str]], env: Mapping[str, str], what: str, timeout: float = 600) -> list[dict[str, Any]]:
    """``python ARGV`` for each of ``argvs`` (one per rank) at once, fresh interpreters with ``env``;
    each one's JSON result line, by rank (a rank that fails or prints none raises, naming ``what``
    and its output). Ranks still running at ``timeout`` or after another failed are killed."""
    procs = [
        subprocess.Popen(
            [sys.executable, *argv], env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for argv in argvs
    ]
    try:
        streams = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    outputs = [(p.returncode, out, err) for p, (out, err) in zip(procs, streams)]
    return [_last_json(o, f"rank {rank} of {what}") for rank, o in enumerate(outputs)]


def uneven_job(world: int = 2, timeout: float = 600) -> list[dict[str, Any]]:
    """:func:`uneven_rank` on ``world`` gloo ranks, fresh interpreters with this one's environment,
    sharing one temporary ``TORCHINDUCTOR_CACHE_DIR`` and a ``file://`` rendezvous; each rank's
    result (the CLI's JSON line), by rank."""
    with tempfile.TemporaryDirectory(prefix="torchfix-repro-") as tmp:
        argvs = [
            [
                "-m",
                MODULE,
                "uneven_rank",
                json.dumps({"rank": rank, "world": world, "init_method": f"file://{tmp}/store"}),
            ]
            for rank in range(world)
        ]
        return run_ranks(argvs, _child_env(os.path.join(tmp, "cache")), "the uneven job", timeout)


def placement() -> Outcome:
    """placement-cache's reproduction (pytorch#188390): two gloo ranks sharing one compile cache
    compile ``x * 2 + 1`` on unevenly sharded DTensors (local ``(2, 8)`` and ``(1, 8)``), rank 0
    first. The bug: rank 1 is served rank 0's AOTAutograd artifact (the measure: Inductor's size
    assert it fails in, or the output difference)."""
    import torch.distributed.tensor  # noqa: F401 - the fix's trigger: settles its state in this interpreter

    first, second = uneven_job(2)
    if not first["ok"]:
        raise RuntimeError(f"rank 0 failed on its own artifact: {first['error']}")
    hits = second["aot"].get("autograd_cache_hit", 0)
    shapes = f"rank 1's {tuple(second['local_shape'])} shard after rank 0's {tuple(first['local_shape'])}"
    if second["ok"]:
        return not_observed(f"{shapes} in one cache directory: output equal to eager (AOTAutograd cache hits {hits})")
    if hits < 1:
        raise RuntimeError(f"rank 1 failed without a cache hit: {second['error']}")
    harm = second["error"] if second["error"] != "compiled result differs from eager" else (
        f"output differs from eager by {second['max_abs_diff']:.3g}"
    )  # fmt: skip
    return observed(f"{shapes} was served rank 0's AOTAutograd artifact: {harm}")


# --- aot-bypass-key -------------------------------------------------------------------------------

SCALE = [float(os.environ.get("SCALE", "2"))]


def opaque(x: Any) -> Any:
    """Reads a global Dynamo never sees (let into graphs with ``allow_in_graph``: not traced, so not
    guarded, and not on AOTAutograd's allowlist: a graph calling it has no regular cache key)."""
    return x * SCALE[0]


def _allow_opaque() -> None:
    import torch._dynamo

    torch._dynamo.allow_in_graph(opaque)


def _bypass_switch() -> dict[str, bool]:
    """Turns on the fallback key on the frame-evaluation path: the 2.11+ functorch flag; on 2.10
    ``enable_aot_compile`` (set here, as ``aot_compile()`` needs it on 2.10/2.11; default on 2.12+)."""
    import torch

    if hasattr(torch._dynamo.config, "enable_aot_compile"):  # absent on 2.8
        torch._dynamo.config.enable_aot_compile = True
    return {"bypass_autograd_cache_key": True} if hasattr(torch._functorch.config, "bypass_autograd_cache_key") else {}


def _three_graphs() -> Any:
    import torch._dynamo

    def fn(x: Any) -> Any:
        a = opaque(x) + 1
        torch._dynamo.graph_break()
        b = opaque(a) - 100
        torch._dynamo.graph_break()
        return opaque(b) * 3

    return fn


def one_capture(_: str) -> dict[str, Any]:
    """pytorch#194451: one ``torch.compile`` of a function with two graph breaks, three unkeyable
    graphs (each calls :func:`opaque`); the keys ``autograd_cache_key`` computed, the output (for
    ones(4)) against eager."""
    import torch
    import torch._functorch._aot_autograd.autograd_cache as ac

    _allow_opaque()
    switch = _bypass_switch()
    keys: list[str] = []
    own = ac.autograd_cache_key

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = own(*args, **kwargs)
        keys.append(out[0])
        return out

    fn = _three_graphs()
    x = torch.ones(4)
    ac.autograd_cache_key = spy  # records the keys try_load computes (module attribute: try_load's binding)
    try:
        with torch._functorch.config.patch(switch):
            out = torch.compile(fn)(x)
    finally:
        ac.autograd_cache_key = own
    eager = fn(x)
    return {"keys": keys, "ok": bool(torch.equal(out, eager)), "out": out.tolist(), "eager": eager.tolist()}


def bypass() -> Outcome:
    """aot-bypass-key's reproduction (pytorch#194451): scenario ``one_capture`` in this interpreter,
    a private cache directory. The bug: the three graphs get one fallback key and graphs 2 and 3 are
    served graph 1's artifact (the measure: the hits and the wrong output)."""
    import torch._functorch._aot_autograd.autograd_cache  # noqa: F401 - the fix's trigger

    with private_cache():
        before = cache_counters()
        r = one_capture("")
        after = cache_counters()
    hits = after.get("autograd_cache_hit", 0) - before.get("autograd_cache_hit", 0)
    if r["ok"]:
        return not_observed(
            f"3 unkeyable graphs of one capture: {len(set(r['keys']))} distinct keys, "
            f"{hits} AOTAutograd cache hits, output equal to eager"
        )
    if hits < 1:
        raise RuntimeError(f"wrong output without a cache hit: {r}")
    return observed(
        f"graphs 2-3 of one capture were served graph 1's artifact ({len(set(r['keys']))} key for 3 graphs, "
        f"{hits} AOTAutograd cache hits): output {r['out'][0]:g} where eager gives {r['eager'][0]:g}"
    )


# --- aot-autocast-key -----------------------------------------------------------------------------


def _mm_relu(x: Any, w: Any) -> Any:
    return (x @ w).relu() + 1


def autocast_runs(dtypes: str) -> dict[str, Any]:
    """Compile ``relu(x @ w) + 1`` (inference) and run it under ``torch.autocast("cpu", dtype=D)`` for
    each D of ``dtypes`` (comma-separated), in this process; each result against eager."""
    import torch

    if os.environ.get("AOT_CACHE") == "0":  # the FX graph cache alone (AOTAutograd cache off)
        torch._functorch.config.enable_autograd_cache = False
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    compiled = torch.compile(_mm_relu, backend="inductor")
    runs = []
    for name in dtypes.split(","):
        with torch.autocast("cpu", dtype=getattr(torch, name)):
            out, ref = compiled(x, w), _mm_relu(x, w)
        runs.append({"autocast": name, "dtype": str(out.dtype), "eager_dtype": str(ref.dtype),
                     "equal": bool(out.dtype == ref.dtype and close(out, ref)),
                     "max_abs_diff": _max_abs_diff(out, ref)})  # fmt: skip
    return {"runs": runs}


def autocast_keys(_: str) -> dict[str, Any]:
    """The AOTAutograd key of one graph under bfloat16, float16 and no autocast, with the live classes
    (the fix's probe helper), plus whether the details pickle."""
    import pickle

    import torch
    import torch._functorch._aot_autograd.autograd_cache as ac
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from torchfix_placement_cache.autocast_key import ATTRIBUTE, key_under_autocast, probe_graph

    keys = {name: key_under_autocast(getattr(torch, name)) for name in ("bfloat16", "float16")}
    gm = probe_graph()
    with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))):
        details = ac.AOTAutogradCacheDetails(gm, [], None, {})
    state = getattr(details, ATTRIBUTE, None)
    return {"keys": keys, "state": repr(state), "state_pickles": pickle.loads(pickle.dumps(state)) == state}


def autocast() -> Outcome:
    """aot-autocast-key's reproduction: scenario ``autocast_runs bfloat16,float16`` in this
    interpreter, a private cache directory. The bug: the float16 recompile is served the bfloat16
    artifact (the measure: its output dtype and difference against eager)."""
    import torch._functorch._aot_autograd.autograd_cache  # noqa: F401 - the fix's trigger

    with private_cache():
        before = cache_counters()
        bf16, fp16 = autocast_runs("bfloat16,float16")["runs"]
        after = cache_counters()
    hits = after.get("autograd_cache_hit", 0) - before.get("autograd_cache_hit", 0)
    if not bf16["equal"]:
        raise RuntimeError(f"the first (bfloat16) compile differs from eager: {bf16}")
    if fp16["equal"]:
        return not_observed(
            f"compiled under bfloat16 then float16 autocast: both outputs equal to eager in dtype and value "
            f"(AOTAutograd cache hits {hits})"
        )
    return observed(
        f"the float16 recompile was served the bfloat16 artifact ({hits} AOTAutograd cache hit): output "
        f"{fp16['dtype'].removeprefix('torch.')} where eager gives {fp16['eager_dtype'].removeprefix('torch.')}, "
        f"max abs diff {fp16['max_abs_diff']:.3g}"
    )


# --- aot-hop-body-key -----------------------------------------------------------------------------


def _opaque_body(x: Any) -> Any:
    return opaque(x.sin())


def _plain_body(x: Any) -> Any:
    return x.sin().cos() * 2


def _compiled_against_eager(fn: Any) -> dict[str, Any]:
    """``fn`` compiled with inductor, forward and backward (the AOTAutograd entry is saved after the
    backward), against ``fn`` eager: outputs and gradients."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(8, requires_grad=True)
    out = torch.compile(fn, backend="inductor")(x)
    out.backward()
    grad = x.grad.detach().clone()  # type: ignore[union-attr]
    x.grad = None
    ref = fn(x)
    ref.backward()
    return {"scale": SCALE[0], "out_ok": close(out, ref), "grad_ok": close(grad, x.grad),
            "out": float(out), "ref": float(ref), "grad_err": _max_abs_diff(grad, x.grad)}  # fmt: skip


def checkpointed(which: str) -> dict[str, Any]:
    """``sum(checkpoint(body, x))`` compiled; ``which`` is ``opaque`` (a body calling :func:`opaque`)
    or ``plain`` (torch ops)."""
    from torch.utils.checkpoint import checkpoint

    _allow_opaque()
    body = _opaque_body if which == "opaque" else _plain_body
    return _compiled_against_eager(lambda x: checkpoint(body, x, use_reentrant=False).sum())


def nested_region(which: str) -> dict[str, Any]:
    """:func:`checkpointed` with the body in ``torch.compiler.nested_compile_region`` instead of a
    checkpoint: Dynamo captures it as an ``invoke_subgraph`` body (no checkpoint)."""
    import torch

    _allow_opaque()
    body = torch.compiler.nested_compile_region(_opaque_body if which == "opaque" else _plain_body)
    return _compiled_against_eager(lambda x: body(x).sum())


def nested_check(_: str) -> dict[str, Any]:
    """``check_cacheable`` on the fix's probe graph (a root holding a body that calls a plain function)."""
    import torch._functorch._aot_autograd.autograd_cache as ac

    from torchfix_placement_cache.hop_body_key import nested_graph, refuses

    root, body = nested_graph()
    return {"root_bypasses": refuses(ac, root), "body_bypasses": refuses(ac, body)}


def hop_body() -> Outcome:
    """aot-hop-body-key's reproduction (pytorch#194658): scenario ``checkpointed opaque`` in two
    fresh interpreters sharing one temporary cache directory, ``SCALE=2`` then ``SCALE=3``. The bug:
    the second is served the first one's artifact (the measure: its output and gradient error)."""
    import torch._functorch._aot_autograd.autograd_cache  # noqa: F401 - the fix's trigger

    with tempfile.TemporaryDirectory(prefix="torchfix-repro-cache-") as cache:
        first = run_child("checkpointed", "opaque", cache, SCALE="2")
        second = run_child("checkpointed", "opaque", cache, SCALE="3")
    if not (first["out_ok"] and first["grad_ok"]):
        raise RuntimeError(f"the first process (SCALE=2) differs from eager: {first}")
    hits = second["counters"].get("autograd_cache_hit", 0)
    if second["out_ok"] and second["grad_ok"]:
        bypasses = second["counters"].get("autograd_cache_bypass", 0)
        return not_observed(
            f"a checkpoint body reading SCALE=2, then 3 in a later process sharing the cache: output and gradient "
            f"equal to eager (AOTAutograd cache hits {hits}, bypasses {bypasses})"
        )
    if hits < 1:
        raise RuntimeError(f"the second process (SCALE=3) is wrong without a cache hit: {second}")
    return observed(
        f"the SCALE=3 process was served the SCALE=2 process's artifact: output {second['out']:.4g} where eager "
        f"gives {second['ref']:.4g}, max abs gradient error {second['grad_err']:.3g}"
    )


SCENARIOS = {
    "uneven_rank": uneven_rank,
    "one_capture": one_capture,
    "autocast_runs": autocast_runs,
    "autocast_keys": autocast_keys,
    "checkpointed": checkpointed,
    "nested_region": nested_region,
    "nested_check": nested_check,
}


def main(argv: list[str]) -> None:
    """``NAME [ARG]``: run one scenario, print its result as one JSON line."""
    import torch

    name, arg = argv[0], (argv[1] if len(argv) > 1 else "")
    result = SCENARIOS[name](arg)
    result.update(torch=torch.__version__, states=fix_states(), counters=cache_counters(), reports=fix_reports())
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
