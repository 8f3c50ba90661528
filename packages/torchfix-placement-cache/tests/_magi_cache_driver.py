"""One rank of a MagiCompiler cache-key scenario (``python _magi_cache_driver.py``, no arguments: Magi's
``CompileConfig`` parses ``sys.argv``). The scenario comes as JSON in ``TFTEST_MAGI_CACHE``::

    {"scenario": "build" | "aot_path", "placement": "shard" | "replicate", "rank": 0, "world": 2,
     "init_method": "file://...", "gather": "redistribute" | "full_tensor", "neutralize_input_count": false}

``build``: a SimpleFSDP-style module (its weight a DTensor, ``Shard(0)`` as ``fully_shard`` leaves it or
``Replicate()``; ``forward`` all-gathers it, with ``redistribute(...).to_local()`` as SimpleFSDP does or
with ``full_tensor()``) compiled by ``magi_compile`` on gloo. Reports Magi's Inductor compile count,
the artifacts it saved, the loads its input-count check refused, correctness and the error.
``neutralize_input_count`` turns off that check (``piecewise_compiler._read_generated_code_expected_arity``),
which refuses every DTensor artifact on torch releases that pass the device mesh to the compiled code,
and so hides the wrong load there.
``aot_path``: ``MagiCompileState.aot_compilation_path`` of that module for each placement (no compile).
The last stdout line is a JSON report (with the fix's ``report()`` row: what it counted).
"""

from __future__ import annotations

import json
import os
import traceback

import torch

CONFIG = json.loads(os.environ["TFTEST_MAGI_CACHE"])


def _module(mesh, placement: str) -> torch.nn.Module:  # type: ignore[no-untyped-def]
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    class SimpleFSDPLinear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.full = torch.randn(16, 8)
            placements = [Shard(0)] if placement == "shard" else [Replicate()]
            self.weight = torch.nn.Parameter(distribute_tensor(self.full, mesh, placements), requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if CONFIG.get("gather", "redistribute") == "full_tensor":
                w = self.weight.full_tensor()
            else:
                w = self.weight.redistribute(placements=[Replicate()]).to_local()
            return x @ w.t()

    return SimpleFSDPLinear()


def build(mesh) -> dict[str, object]:  # type: ignore[no-untyped-def]
    from magi_compiler import magi_compile
    from magi_compiler.magi_backend import piecewise_compiler
    from magi_compiler.utils import compilation_counter

    if CONFIG.get("neutralize_input_count"):
        piecewise_compiler._read_generated_code_expected_arity = lambda path: None
    refused = []
    adaptor = piecewise_compiler.InductorStandaloneAdaptor
    load = adaptor.load

    def counting_load(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        loaded = load(self, *args, **kwargs)
        if loaded is None:  # Magi's only "skip this artifact" answer: the input-count check
            refused.append(1)
        return loaded

    adaptor.load = counting_load
    model = _module(mesh, CONFIG["placement"])
    compiled = magi_compile(model, dynamic_arg_dims={"x": 0})
    x = torch.randn(4, 8)
    report: dict[str, object] = {"error": None}
    try:
        report["ok"] = bool(torch.allclose(compiled(x), x @ model.full.t()))
    except Exception as exc:  # noqa: BLE001 - the report says what the compiled code raised
        report["ok"] = False
        report["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        report["traceback"] = traceback.format_exc()[-6000:]  # as Python prints it (the signature tests)
    report["inductor_compiles"] = compilation_counter.num_inductor_compiles
    report["artifacts_saved"] = compilation_counter.num_compiled_artifacts_saved
    report["loads_refused"] = len(refused)
    return report


def aot_path(mesh) -> dict[str, object]:  # type: ignore[no-untyped-def]
    from magi_compiler.config import get_compile_config
    from magi_compiler.magi_backend.magi_compiler_base import MagiCompileState

    paths = {}
    for placement in ("shard", "replicate", "shard"):
        state = MagiCompileState(
            _module(mesh, placement),
            get_compile_config(),
            1,
            "SimpleFSDPLinear",
            {"x": 0},
            target_method_name="forward",
        )
        paths.setdefault(placement, []).append(state.aot_compilation_path)
    return {"paths": paths}


def main() -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    rank, world = int(CONFIG.get("rank", 0)), int(CONFIG.get("world", 1))
    dist.init_process_group("gloo", init_method=CONFIG["init_method"], rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        report = build(mesh) if CONFIG["scenario"] == "build" else aot_path(mesh)
        import torchfix_core
        from torchfix_core.testing import report_of

        report["state"] = next((r.state for r in torchfix_core.status() if r.id == "magi-cache-key"), None)
        report["report"] = report_of("magi-cache-key")
        report["rank"] = rank
        print(json.dumps(report), flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
