"""magi-cache-key on MagiCompiler's real source (``nox -s magi``; skipped where Magi is absent).

A SimpleFSDP-style module is compiled by ``magi_compile`` in one job (2 ranks on gloo, one shared Magi
cache root), then the same source with its weight ``Replicate()`` instead of ``Shard(0)`` in a second
job. The red/green pair runs the fix's declared reproduction (``FixSpec.reproduction``:
``torchfix_placement_cache.reproduction_magi``, shipped in the wheel: what ``torchfix-doctor verify``
runs) through ``torchfix_core.testing.reproduce``; the other tests run that module's builds
(``build_job``) themselves. "Without torchfix" is ``TORCHFIX_AUTOLOAD=0`` in those builds (the
reproduction: the fix alone off).

What is visible depends on the torch release, and the tests decide it from a live check (the
``warm_start`` fixture: the same layout compiled twice, one rank, without torchfix), never from a
version string:

* whether Magi persists the artifact of a DTensor graph at all (torch 2.11's AOTAutograd cache
  bypasses graphs with Dynamo's ``redistribute``/``to_local`` wrappers; ``full_tensor()`` is cached):
  the reproduction uses SimpleFSDP's ``redistribute(...).to_local()`` where it is persisted, else
  ``full_tensor()``;
* whether Magi's load-time input-count check refuses even an identical layout (torch releases that
  pass the device mesh to the compiled code, 2.12 and 2.13): the reproduction neutralises that check
  so that the wrong load shows, and says so in its measure exactly where the check would have refused
  (see docs/fixes/magi-cache-key.md).

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
from torchfix_core.testing import reproduce, state_to_expect
from torchfix_placement_cache.reproduction_magi import GATHERS, build_job

MAGI = importlib.util.find_spec("magi_compiler") is not None
pytestmark = pytest.mark.skipif(not MAGI, reason="magi_compiler is not installed (nox -s magi installs it)")
DRIVER = Path(__file__).with_name("_magi_cache_driver.py")
FIX_ID = "magi-cache-key"
#: Inductor's size assert of the red run: the Replicate() build ran the Shard(0) artifact
SIZE_ASSERT = "AssertionError: expected size 16==8, stride 8==8 at dim=0"
NEUTRALISED = "Magi's load-time input-count check neutralised"


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
    """One ``world``-rank build of the shipped reproduction's module (``build_job``) on gloo, with
    ``cache_root``'s Magi and Inductor caches; ``extra``: the ranks' ``gather`` and
    ``neutralize_input_count``. The per-rank reports."""
    return build_job(str(cache_root), placement, world=world, env={**clean_env(cache_root), **fix_env(fix)}, **extra)


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


def test_placement_change_loads_the_wrong_magi_artifact_without_fix(warm_start: dict[str, Any]) -> None:
    """The declared reproduction, the fix alone off: the Replicate() build loads the Shard(0) build's
    artifact (0 Inductor compiles) and fails Inductor's size assert on both ranks."""
    off = reproduce(FIX_ID, False)
    assert off["state"] == "disabled", off
    measure = off["outcome"]["measure"]
    if warm_start["gather"] is None:  # nothing persisted: nothing to load wrongly
        assert off["outcome"]["result"] == "not-observed" and "Magi saved no artifact" in measure, off
        return
    assert off["outcome"]["result"] == "observed", off
    assert measure.startswith(
        f"the Replicate() build loaded the Shard(0) build's artifact ({warm_start['gather']}; "
        f"0 Inductor compiles on 2 of 2 ranks): {SIZE_ASSERT}"
    ), off
    assert (NEUTRALISED in measure) == warm_start["refused"], (off, warm_start["refused"])


def test_placement_change_recompiles_and_equal_placements_hit_with_fix(warm_start: dict[str, Any]) -> None:
    """The declared reproduction, the fix alone on (forced where this torch is outside its range):
    the Replicate() build compiles its own artifact, and built again it warm-starts from it."""
    on = reproduce(FIX_ID, True, env=fix_env(True))
    assert on["state"] == "applied", on
    assert on["outcome"]["result"] == "not-observed", on
    measure = on["outcome"]["measure"]
    if warm_start["gather"] is None:
        assert "Magi saved no artifact" in measure, on
        return
    assert measure.startswith(
        f"Replicate() after Shard(0) under one Magi cache root ({warm_start['gather']}): 1 Inductor compile "
        "per rank, output equal to eager; built again: 0 Inductor compiles per rank (a warm start)"
    ), on  # a miss for the new layout, a hit for an equal one
    assert (NEUTRALISED in measure) == warm_start["refused"], (on, warm_start["refused"])


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
