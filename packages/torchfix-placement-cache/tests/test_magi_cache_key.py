"""magi-cache-key on MagiCompiler's real source (``nox -s magi``; skipped where Magi is absent).

A SimpleFSDP-style module is compiled by ``magi_compile`` in one job (2 ranks on gloo, one shared Magi
cache root), then the same source with its weight ``Replicate()`` instead of ``Shard(0)`` in a second
job. "Without torchfix" is ``TORCHFIX_AUTOLOAD=0``.

What is visible depends on the torch release, and the tests decide it from a live check (the
``warm_start`` fixture: the same layout compiled twice, one rank, without torchfix), never from a
version string:

* whether Magi persists the artifact of a DTensor graph at all (torch 2.11's AOTAutograd cache
  bypasses graphs with Dynamo's ``redistribute``/``to_local`` wrappers; ``full_tensor()`` is cached):
  the red/green pair uses SimpleFSDP's ``redistribute(...).to_local()`` where it is persisted, else
  ``full_tensor()``;
* whether Magi's load-time input-count check refuses even an identical layout (torch releases that
  pass the device mesh to the compiled code, 2.12 and 2.13): the red/green pair neutralises it there so
  that the wrong load shows (see docs/fixes/placement-cache.md, "MagiCompiler"). Elsewhere Magi runs
  untouched.

Where the installed torch is outside the fix's validated range the "with" runs force the fix
(``TORCHFIX_FORCE``), so the same file shows whether it works there.
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
from torchfix_core.testing import state_to_expect

MAGI = importlib.util.find_spec("magi_compiler") is not None
pytestmark = pytest.mark.skipif(not MAGI, reason="magi_compiler is not installed (nox -s magi installs it)")
DRIVER = Path(__file__).with_name("_magi_cache_driver.py")
FIX_ID = "magi-cache-key"
GATHERS = ("redistribute", "full_tensor")  # SimpleFSDP's own all-gather first


def clean_env(cache_root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "MAGI_COMPILE_"))}
    env.update(
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(cache_root / "inductor"),
        MAGI_COMPILE_CACHE_ROOT_DIR=str(cache_root / "magi"),
    )
    return env


def fix_env(fix: bool) -> dict[str, str]:
    """Without torchfix: autoload off. With it: plain autoload, or the fix forced where the installed
    torch is outside its validated range (the bug is present wherever Magi persists the artifact)."""
    if not fix:
        return {"TORCHFIX_AUTOLOAD": "0"}
    return {"TORCHFIX_FORCE": FIX_ID} if state_to_expect(FIX_ID, bug_present=True) == "out-of-range" else {}


def job(cache_root: Path, placement: str, *, world: int = 2, fix: bool = True, **extra: Any) -> list[dict[str, Any]]:
    """One ``world``-rank job on gloo; the per-rank reports."""
    env = {**clean_env(cache_root), **fix_env(fix)}
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


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Live check, without torchfix, one rank: one layout compiled in two processes sharing a Magi
    cache, for the first all-gather style whose artifact Magi persists on this torch. ``gather`` is
    that style (None: Magi persists no DTensor artifact here), ``refused`` whether Magi's input-count
    check refused the identical artifact, ``runs`` the reports."""
    tried = {}
    for gather in GATHERS:
        root = tmp_path_factory.mktemp(f"warm-{gather}")
        runs = [job(root, "shard", world=1, fix=False, gather=gather)[0] for _ in range(2)]
        tried[gather] = runs
        if runs[0]["artifacts_saved"] > 0:
            return {"gather": gather, "refused": runs[1]["loads_refused"] > 0, "runs": runs, "tried": tried}
    return {"gather": None, "refused": False, "runs": None, "tried": tried}


def needs_persisted_artifact(warm: dict[str, Any]) -> None:
    if warm["gather"] is None:
        pytest.skip(f"Magi persists no artifact of a DTensor graph on this torch: nothing to load wrongly ({warm})")


def test_warm_start_of_an_identical_dtensor_layout_on_this_torch(warm_start: dict[str, Any]) -> None:
    """The live check itself, pinned: a persisted artifact is reused unless the input-count check
    refuses it (torch passing the device mesh to the compiled code), in which case it is recompiled.
    torchfix keeps that check (docs/fixes/placement-cache.md says why)."""
    for gather, runs in warm_start["tried"].items():
        assert all(r["ok"] and r["error"] is None for r in runs), (gather, runs)
        first, second = runs
        assert first["inductor_compiles"] == 1 and first["loads_refused"] == 0, (gather, runs)
        if first["artifacts_saved"] == 0:
            assert second["inductor_compiles"] == 1 and second["loads_refused"] == 0, (gather, runs)
        elif second["loads_refused"]:
            assert second["inductor_compiles"] == 1, (gather, runs)  # refused: no warm start
        else:
            assert second["inductor_compiles"] == 0, (gather, runs)  # a warm start


def test_placement_change_loads_the_wrong_magi_artifact_without_fix(tmp_path: Path, warm_start: dict[str, Any]) -> None:
    needs_persisted_artifact(warm_start)
    opts = {"gather": warm_start["gather"], "neutralize_input_count": warm_start["refused"]}
    first = job(tmp_path, "shard", fix=False, **opts)
    assert all(r["ok"] and r["inductor_compiles"] == 1 for r in first), first
    second = job(tmp_path, "replicate", fix=False, **opts)
    for r in second:
        assert r["inductor_compiles"] == 0, second  # the Shard(0) artifact was loaded
        assert r["error"] == "AssertionError: expected size 16==8, stride 8==8 at dim=0", second


def test_placement_change_recompiles_and_equal_placements_hit_with_fix(
    tmp_path: Path, warm_start: dict[str, Any]
) -> None:
    needs_persisted_artifact(warm_start)
    opts = {"gather": warm_start["gather"], "neutralize_input_count": warm_start["refused"]}
    first = job(tmp_path, "shard", **opts)
    assert all(r["state"] == "applied" and r["ok"] and r["inductor_compiles"] == 1 for r in first), first
    second = job(tmp_path, "replicate", **opts)
    assert all(r["ok"] and r["inductor_compiles"] == 1 for r in second), second  # a miss: compiled again
    third = job(tmp_path, "replicate", **opts)
    assert all(r["ok"] and r["inductor_compiles"] == 0 for r in third), third  # equal placements: a hit


def test_aot_artifact_path_covers_module_dtensor_placements(tmp_path: Path) -> None:
    def paths(env: dict[str, str]) -> dict[str, Any]:
        child = {**clean_env(tmp_path / str(len(list(tmp_path.iterdir())))), **env}
        init = f"file://{tempfile.mkdtemp(prefix='tf-magi-pg-')}/store"
        child["TFTEST_MAGI_CACHE"] = json.dumps({"scenario": "aot_path", "init_method": init})
        proc = subprocess.run([sys.executable, str(DRIVER)], env=child, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    before = paths(fix_env(False))["paths"]
    key_misses_layout = before["shard"][0] == before["replicate"][0]
    assert key_misses_layout  # red: one artifact for both layouts (Magi 8e2e47c's key)
    plain = paths({})
    assert plain["state"] == state_to_expect(FIX_ID, bug_present=key_misses_layout), plain
    after = plain["paths"] if plain["state"] == "applied" else paths(fix_env(True))["paths"]
    assert after["shard"][0] != after["replicate"][0]
    assert after["shard"][0] == after["shard"][1]  # equal placements keep one path
    assert "torchfix-placement-" in after["shard"][0]
