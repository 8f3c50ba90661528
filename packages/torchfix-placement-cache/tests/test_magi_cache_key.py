"""magi-cache-key on MagiCompiler's real source (``nox -s magi``; skipped where Magi is absent).

A SimpleFSDP-style module is compiled by ``magi_compile`` in one job (2 ranks on gloo, one shared Magi
cache root), then the same source with its weight ``Replicate()`` instead of ``Shard(0)`` in a second
job. "Without torchfix" is ``TORCHFIX_AUTOLOAD=0``. On torch 2.13 Magi's load-time input-count check
refuses every DTensor artifact (see docs/fixes/placement-cache.md, "MagiCompiler"); the red/green
pair neutralises it in the driver so that the wrong load shows, and one test pins the check's
effect as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

MAGI = importlib.util.find_spec("magi_compiler") is not None
pytestmark = pytest.mark.skipif(not MAGI, reason="magi_compiler is not installed (nox -s magi installs it)")
DRIVER = Path(__file__).with_name("_magi_cache_driver.py")


def job(cache_root: Path, placement: str, *, world: int = 2, fix: bool = True, **extra: Any) -> list[dict[str, Any]]:
    """One ``world``-rank job on gloo; the per-rank reports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "MAGI_COMPILE_"))}
    env.update(
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(cache_root / "inductor"),
        MAGI_COMPILE_CACHE_ROOT_DIR=str(cache_root / "magi"),
    )
    if not fix:
        env["TORCHFIX_AUTOLOAD"] = "0"
    init = f"file://{tempfile.mkdtemp(prefix='tf-magi-pg-')}/store"
    procs = []
    for rank in range(world):
        config = {"scenario": "build", "placement": placement, "rank": rank, "world": world, "init_method": init}
        config.update(extra)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(DRIVER)],
                env={**env, "TFTEST_MAGI_CACHE": json.dumps(config)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-4000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def test_placement_change_loads_the_wrong_magi_artifact_without_fix(tmp_path: Path) -> None:
    first = job(tmp_path, "shard", fix=False, neutralize_input_count=True)
    assert all(r["ok"] and r["inductor_compiles"] == 1 for r in first), first
    second = job(tmp_path, "replicate", fix=False, neutralize_input_count=True)
    for r in second:
        assert r["inductor_compiles"] == 0, second  # the Shard(0) artifact was loaded
        assert r["error"] == "AssertionError: expected size 16==8, stride 8==8 at dim=0", second


def test_placement_change_recompiles_and_equal_placements_hit_with_fix(tmp_path: Path) -> None:
    first = job(tmp_path, "shard", neutralize_input_count=True)
    assert all(r["state"] == "applied" and r["ok"] and r["inductor_compiles"] == 1 for r in first), first
    second = job(tmp_path, "replicate", neutralize_input_count=True)
    assert all(r["ok"] and r["inductor_compiles"] == 1 for r in second), second  # a miss: compiled again
    third = job(tmp_path, "replicate", neutralize_input_count=True)
    assert all(r["ok"] and r["inductor_compiles"] == 0 for r in third), third  # equal placements: a hit


def test_magi_input_count_check_refuses_every_dtensor_artifact_on_this_torch(tmp_path: Path) -> None:
    """Why the red/green pair neutralises the check: left as it is, even an identical layout is
    recompiled (torch 2.13 passes the device mesh to the compiled code as an extra input). torchfix
    keeps the check (docs/fixes/placement-cache.md says why)."""
    runs = [job(tmp_path, "shard", world=1)[0] for _ in range(2)]
    assert [r["inductor_compiles"] for r in runs] == [1, 1] and all(r["ok"] for r in runs), runs


def test_aot_artifact_path_covers_module_dtensor_placements(tmp_path: Path) -> None:
    def paths(fix: bool) -> dict[str, list[str]]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "MAGI_COMPILE_"))}
        env["MAGI_COMPILE_CACHE_ROOT_DIR"] = str(tmp_path / ("fix" if fix else "nofix"))
        if not fix:
            env["TORCHFIX_AUTOLOAD"] = "0"
        init = f"file://{tempfile.mkdtemp(prefix='tf-magi-pg-')}/store"
        env["TFTEST_MAGI_CACHE"] = json.dumps({"scenario": "aot_path", "init_method": init})
        proc = subprocess.run([sys.executable, str(DRIVER)], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])["paths"]  # type: ignore[no-any-return]

    before = paths(fix=False)
    assert before["shard"][0] == before["replicate"][0]  # red: one artifact for both layouts
    after = paths(fix=True)
    assert after["shard"][0] != after["replicate"][0]
    assert after["shard"][0] == after["shard"][1]  # equal placements keep one path
    assert "torchfix-placement-" in after["shard"][0]
