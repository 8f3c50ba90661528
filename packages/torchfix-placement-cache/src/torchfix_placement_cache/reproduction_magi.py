"""magi-cache-key's reproduction (``FixSpec.reproduction``: :func:`magi_cache_key`), and the rank
behind it: ``python -m torchfix_placement_cache.reproduction_magi CONFIG`` builds a SimpleFSDP-style
module with MagiCompiler on one gloo rank and prints one JSON line (:func:`build_rank`).

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
Magi tests run (``tests/test_magi_cache_key.py``, under ``nox -s magi``); imported only when the
reproduction runs (torch and Magi are imported inside its functions). Every build runs in fresh
interpreters with a private, temporary Magi cache root (``MAGI_COMPILE_CACHE_ROOT_DIR``) and
Inductor cache directory, never the user's; Magi's other ``MAGI_COMPILE_*`` variables are cleared
and so is the rank's command line (Magi's ``CompileConfig`` parses both): Magi's default
configuration.

The case (docs/fixes/magi-cache-key.md): a module whose weight is a DTensor, ``Shard(0)`` as
``fully_shard`` leaves it, is compiled by ``magi_compile`` on 2 ranks; then the same source with the
weight ``Replicate()``, under the same Magi cache root. Magi's cache directory does not cover the
placements, so without the fix the second build loads the first one's artifact: 0 Inductor compiles
and Inductor's size assert (``expected size 16==8``). The all-gather is SimpleFSDP's
``redistribute(...).to_local()`` where Magi saves that graph's artifact, else ``full_tensor()``
(torch 2.11: the AOTAutograd cache bypasses Dynamo's ``redistribute``/``to_local`` wrappers, so Magi
saves nothing to load).

Magi's load-time input-count check (``InductorStandaloneAdaptor.load`` skips an artifact whose saved
``call(self, args)`` arity differs from the inputs) is neutralised in these builds: on torch releases
that pass the device mesh to the compiled code (2.12, 2.13) it refuses every DTensor artifact, right
or wrong, and so hides the wrong load (the fix keeps the check: docs/fixes/magi-cache-key.md says
why). Where it would not refuse, neutralising it changes nothing; each rank counts the loads it
would have refused (``arity_mismatches``) and the outcome says when there were any.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from typing import Any, Mapping

from torchfix_core.reproduction import Outcome, cannot_run, not_observed, observed

from torchfix_placement_cache.reproduction import run_ranks

MODULE = "torchfix_placement_cache.reproduction_magi"
FIX_ID = "magi-cache-key"
#: how the module all-gathers its weight: SimpleFSDP's own first, then the one torch 2.11's
#: AOTAutograd cache keeps (Magi saves an artifact only where that cache does)
GATHERS = ("redistribute", "full_tensor")
#: the global shape of the weight (16, 8): on 2 ranks its ``Shard(0)`` local shard is (8, 8)
ROWS, COLS = 16, 8


def simple_fsdp_linear(mesh: Any, placement: str, gather: str = "redistribute") -> Any:
    """A SimpleFSDP-style ``nn.Module``: its weight (``full``, seeded, ``(16, 8)``) a DTensor on
    ``mesh``, ``Shard(0)`` for ``placement="shard"`` or ``Replicate()``; ``forward(x)`` all-gathers
    it (``gather``: ``redistribute(...).to_local()`` or ``full_tensor()``) and returns ``x @ w.t()``."""
    import torch
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    class SimpleFSDPLinear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.full = torch.randn(ROWS, COLS)
            placements = [Shard(0)] if placement == "shard" else [Replicate()]
            self.weight = torch.nn.Parameter(distribute_tensor(self.full, mesh, placements), requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            weight: Any = self.weight  # a DTensor Parameter
            if gather == "full_tensor":
                w = weight.full_tensor()
            else:
                w = weight.redistribute(placements=[Replicate()]).to_local()
            return x @ w.t()

    return SimpleFSDPLinear()


def _observe_loads(neutralize_input_count: bool) -> tuple[list[int], list[list[int]]]:
    """Wraps Magi's ``InductorStandaloneAdaptor.load`` in this process to count the loads it refused
    (it returns None: its input-count check) and the loads whose saved arity differs from the inputs
    (what that check refuses), and neutralises the check where asked. Returns both lists, filled as
    Magi loads."""
    import inspect

    from magi_compiler.magi_backend import piecewise_compiler

    arity = getattr(piecewise_compiler, "_read_generated_code_expected_arity", None)
    if neutralize_input_count and arity is not None:
        piecewise_compiler._read_generated_code_expected_arity = lambda path: None
    refused: list[int] = []
    mismatches: list[list[int]] = []
    adaptor = piecewise_compiler.InductorStandaloneAdaptor
    load = adaptor.load
    params = inspect.signature(load)

    def observing_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        given = params.bind(self, *args, **kwargs).arguments
        inputs, handle = given.get("example_inputs"), given.get("cache_handle")
        expected = arity(handle.path) if arity is not None and handle is not None else None
        if expected is not None and inputs is not None and expected != len(inputs):
            mismatches.append([expected, len(inputs)])
        loaded = load(self, *args, **kwargs)
        if loaded is None:  # Magi's only "skip this artifact" answer: the input-count check
            refused.append(1)
        return loaded

    adaptor.load = observing_load
    return refused, mismatches


def _build(mesh: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    import torch
    from magi_compiler import magi_compile
    from magi_compiler.utils import compilation_counter

    refused, mismatches = _observe_loads(bool(config.get("neutralize_input_count")))
    model = simple_fsdp_linear(mesh, config["placement"], config.get("gather", "redistribute"))
    compiled = magi_compile(model, dynamic_arg_dims={"x": 0})
    x = torch.randn(4, COLS)
    expected = x @ model.full.t()
    report: dict[str, Any] = {"ok": False, "error": None}
    try:
        out = compiled(x)
        report["max_abs_diff"] = float((out - expected).abs().max()) if out.shape == expected.shape else float("inf")
        report["ok"] = bool(torch.allclose(out, expected))
    except Exception as exc:  # noqa: BLE001 - the report says what the compiled code raised
        report["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        report["traceback"] = traceback.format_exc()[-6000:]  # as Python prints it (torchfix-doctor explain)
    report["inductor_compiles"] = compilation_counter.num_inductor_compiles
    report["artifacts_saved"] = compilation_counter.num_compiled_artifacts_saved
    report["loads_refused"] = len(refused)
    report["arity_mismatches"] = mismatches
    return report


def build_rank(config: Mapping[str, Any]) -> dict[str, Any]:
    """One rank of a build: ``config`` is ``{"placement": "shard" | "replicate", "rank": 0, "world": 2,
    "init_method": "file://...", "gather": "redistribute" | "full_tensor", "neutralize_input_count":
    false}``. :func:`simple_fsdp_linear` compiled by ``magi_compile`` (``x``'s first dimension
    dynamic) and called once on a ``(4, 8)`` input. Reports ``ok`` (equal to eager), ``error`` (and
    ``traceback``) where the call raised, ``max_abs_diff`` where it returned, Magi's
    ``inductor_compiles`` and ``artifacts_saved``, ``loads_refused`` (by the input-count check),
    ``arity_mismatches`` (``[saved, given]`` of each load that check refuses, neutralised or not),
    and the fix's ``state`` and ``report()`` row."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    sys.argv = sys.argv[:1]  # Magi's CompileConfig parses the command line: give it none
    rank, world = int(config.get("rank", 0)), int(config.get("world", 1))
    dist.init_process_group("gloo", init_method=config["init_method"], rank=rank, world_size=world)
    try:
        report = _build(init_device_mesh("cpu", (world,)), config)
    finally:
        dist.destroy_process_group()
    import torchfix_core
    from torchfix_core.testing import report_of

    report["state"] = next((str(r.state) for r in torchfix_core.status() if r.id == FIX_ID), None)
    report["report"] = report_of(FIX_ID)
    report["rank"] = rank
    return report


def build_job(
    root: str,
    placement: str,
    *,
    world: int = 2,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    **options: Any,
) -> list[dict[str, Any]]:
    """One build (:func:`build_rank`) on ``world`` gloo ranks, fresh interpreters with ``env`` (this
    interpreter's environment by default) less Magi's ``MAGI_COMPILE_*`` variables, ``root/magi`` as
    Magi's cache root and ``root/inductor`` as Inductor's cache directory; ``options`` are the ranks'
    ``gather`` and ``neutralize_input_count``. Each rank's report, by rank."""
    child = {k: v for k, v in (os.environ if env is None else env).items() if not k.startswith("MAGI_COMPILE_")}
    child.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    child.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    child["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    child["MAGI_COMPILE_CACHE_ROOT_DIR"] = os.path.join(root, "magi")
    with tempfile.TemporaryDirectory(prefix="torchfix-repro-pg-") as rendezvous:
        job = {"placement": placement, "world": world, "init_method": f"file://{rendezvous}/store", **options}
        argvs = [["-m", MODULE, json.dumps({**job, "rank": rank})] for rank in range(world)]
        return run_ranks(argvs, child, f"the {placement} build", timeout)


def _compiles(reports: list[dict[str, Any]]) -> str:
    counts = sorted({r["inductor_compiles"] for r in reports})
    each = " or ".join(map(str, counts))
    return f"{each} Inductor compile{'' if counts == [1] else 's'} per rank"


def magi_cache_key() -> Outcome:
    """magi-cache-key's reproduction (MagiCompiler PR #89): :func:`build_job` on 2 ranks, one
    temporary Magi cache root, ``Shard(0)`` then ``Replicate()`` (and, where that one ran right, it
    again: the warm start the fix must keep). The bug: the ``Replicate()`` build loads the
    ``Shard(0)`` build's artifact, 0 Inductor compiles (the measure: Inductor's size assert it fails
    in, or its output difference against eager). Not observed where Magi saves no artifact of the
    DTensor graph with either all-gather. A ``Shard(0)`` build that fails, or a ``Replicate()`` build
    that fails after compiling its own artifact, means the reproduction broke."""
    import importlib.util

    import torch.distributed as dist  # first: torchfix resolves the fix's state here at torch's import

    if importlib.util.find_spec("magi_compiler") is None:
        return cannot_run("magi_compiler is not installed")
    if not (dist.is_available() and dist.is_gloo_available()):
        return cannot_run("this torch has no torch.distributed gloo backend")
    again: list[dict[str, Any]] | None = None
    with tempfile.TemporaryDirectory(prefix="torchfix-repro-magi-") as tmp:
        for gather in GATHERS:
            root = os.path.join(tmp, gather)
            first = build_job(root, "shard", gather=gather, neutralize_input_count=True)
            if not all(r["ok"] for r in first):
                raise RuntimeError(f"the Shard(0) build failed on its own: {[r['error'] for r in first]}")
            if all(r["artifacts_saved"] > 0 for r in first):
                break
        else:
            return not_observed(
                f"Magi saved no artifact of the Shard(0) build's DTensor graph here (all-gather by "
                f"{' or '.join(GATHERS)}): nothing for the Replicate() build to load"
            )
        second = build_job(root, "replicate", gather=gather, neutralize_input_count=True)
        if all(r["ok"] for r in second):
            again = build_job(root, "replicate", gather=gather, neutralize_input_count=True)
    checked = [m for r in second + (again or []) for m in r["arity_mismatches"]]
    note = (
        f" (Magi's load-time input-count check neutralised: it would have refused {len(checked)} load(s), "
        f"saved code taking {checked[0][0]} inputs, {checked[0][1]} given)"
        if checked
        else ""
    )
    if again is not None:
        warm = "a warm start" if all(r["inductor_compiles"] == 0 for r in again) else "no warm start"
        return not_observed(
            f"Replicate() after Shard(0) under one Magi cache root ({gather}): {_compiles(second)}, output "
            f"equal to eager; built again: {_compiles(again)} ({warm}){note}"
        )
    wrong = [r for r in second if not r["ok"]]
    if any(r["inductor_compiles"] > 0 for r in wrong):
        raise RuntimeError(f"the Replicate() build failed after compiling its own artifact: {wrong}"[:2000])
    harm = wrong[0]["error"] or f"output differs from eager by {wrong[0]['max_abs_diff']:.3g}"
    return observed(
        f"the Replicate() build loaded the Shard(0) build's artifact ({gather}; 0 Inductor compiles on "
        f"{len(wrong)} of {len(second)} ranks): {harm}{note}"
    )


def main(argv: list[str]) -> None:
    """``CONFIG``: run :func:`build_rank`, print its report as one JSON line."""
    import torch

    report = build_rank(json.loads(argv[0]))
    report["torch"] = torch.__version__
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
