"""MagiCompiler's AOT artifact path of the SimpleFSDP-style module for each placement
(``python _magi_cache_driver.py``, no arguments: Magi's ``CompileConfig`` parses ``sys.argv``). The
scenario comes as JSON in ``TFTEST_MAGI_CACHE``: ``{"scenario": "aot_path", "init_method": "file://..."}``.

``aot_path``: ``MagiCompileState.aot_compilation_path`` of the module of the shipped reproduction
(``torchfix_placement_cache.reproduction_magi.simple_fsdp_linear``) for ``Shard(0)``, ``Replicate()``
and ``Shard(0)`` again, one rank, no compile. The builds themselves run in that module
(``build_job``). The last stdout line is a JSON report (with the fix's ``report()`` row: what it counted).
"""

from __future__ import annotations

import json
import os

CONFIG = json.loads(os.environ["TFTEST_MAGI_CACHE"])


def aot_path(mesh) -> dict[str, object]:  # type: ignore[no-untyped-def]
    from magi_compiler.config import get_compile_config
    from magi_compiler.magi_backend.magi_compiler_base import MagiCompileState
    from torchfix_placement_cache.reproduction_magi import simple_fsdp_linear

    paths = {}
    for placement in ("shard", "replicate", "shard"):
        state = MagiCompileState(
            simple_fsdp_linear(mesh, placement),
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

    assert CONFIG["scenario"] == "aot_path", CONFIG
    dist.init_process_group("gloo", init_method=CONFIG["init_method"], rank=0, world_size=1)
    try:
        report = aot_path(init_device_mesh("cpu", (1,)))
        import torchfix_core
        from torchfix_core.testing import report_of

        report["state"] = next((r.state for r in torchfix_core.status() if r.id == "magi-cache-key"), None)
        report["report"] = report_of("magi-cache-key")
        print(json.dumps(report), flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
