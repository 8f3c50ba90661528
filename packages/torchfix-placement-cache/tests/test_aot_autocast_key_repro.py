"""aot-autocast-key: the AOTAutograd cache key and the ambient autocast dtype, red without the fix, green with it.

Without the fix (torch 2.8-2.12) a function compiled by Inductor under ``torch.autocast("cpu",
dtype=torch.bfloat16)`` and run again under ``dtype=torch.float16`` loads the bfloat16 artifact from
the AOTAutograd cache: in the same process (Dynamo recompiles on the changed autocast state and the
recompile hits) and in a later process with the same cache directory. Its output is bfloat16 where
eager gives float16. With the fix the key records (enabled, dtype) per device (pytorch/pytorch#181564,
torch 2.15's shape) and each dtype gets its own entry. On 2.13+ torch keys the dtype itself: the
"without" tests skip and the fix is ``not-needed``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _aot_cache_key_util import AUTOCAST, autocast_bug_present, expected_state, run  # noqa: F401 (skipif strings)
from torchfix_core.testing import reproduce

needs_bug = pytest.mark.skipif("not autocast_bug_present()", reason="torch keys the autocast dtype itself here")
pytestmark = pytest.mark.filterwarnings("ignore")


# --- the key itself (no compile: the fast tests) ------------------------------------------------------


@needs_bug
def test_key_ignores_autocast_dtype_fails_without_fix(tmp_path: Path) -> None:
    r = run(AUTOCAST, False, tmp_path, "autocast_keys")
    assert r["keys"]["bfloat16"] == r["keys"]["float16"], r  # one key for two dtypes: the bug


def test_key_covers_autocast_dtype_passes_with_fix(tmp_path: Path) -> None:
    first = run(AUTOCAST, True, tmp_path, "autocast_keys")
    second = run(AUTOCAST, True, tmp_path, "autocast_keys")
    assert first["states"][AUTOCAST] == expected_state(AUTOCAST), first
    assert first["keys"]["bfloat16"] != first["keys"]["float16"], first
    # deterministic across processes, and what is recorded pickles back to itself
    assert first["keys"] == second["keys"], (first, second)
    assert first["state_pickles"], first


# --- the user-visible failure: a bfloat16 artifact served under float16 -------------------------------

ONE_PROCESS = "bfloat16,float16"


@needs_bug
@pytest.mark.slow
def test_autocast_dtype_change_in_one_process_fails_without_fix(tmp_path: Path) -> None:
    r = run(AUTOCAST, False, tmp_path, "autocast_runs", ONE_PROCESS)
    bf16, fp16 = r["runs"]
    assert bf16["equal"] and bf16["dtype"] == "torch.bfloat16", r
    assert r["counters"].get("autograd_cache_hit") == 1, r  # the float16 recompile hits the bf16 entry
    assert fp16["dtype"] == "torch.bfloat16" and fp16["eager_dtype"] == "torch.float16", r
    assert not fp16["equal"], r


@pytest.mark.slow
def test_autocast_dtype_change_in_one_process_passes_with_fix(tmp_path: Path) -> None:
    r = run(AUTOCAST, True, tmp_path, "autocast_runs", ONE_PROCESS)
    assert r["states"][AUTOCAST] == expected_state(AUTOCAST), r
    assert all(run_["equal"] for run_ in r["runs"]), r
    assert r["counters"].get("autograd_cache_hit", 0) == 0 and r["counters"].get("autograd_cache_miss") == 2, r


def _two_processes(tmp_path: Path, fix: bool) -> tuple[dict, dict]:  # type: ignore[type-arg]
    shared = tmp_path / "shared-cache"  # one TORCHINDUCTOR_CACHE_DIR for both processes
    return run(AUTOCAST, fix, shared, "autocast_runs", "bfloat16"), run(
        AUTOCAST, fix, shared, "autocast_runs", "float16"
    )


@needs_bug
@pytest.mark.slow
def test_autocast_dtype_change_across_processes_fails_without_fix(tmp_path: Path) -> None:
    first, second = _two_processes(tmp_path, fix=False)
    assert first["runs"][0]["equal"] and first["counters"].get("autograd_cache_saved") == 1, first
    assert second["counters"].get("autograd_cache_hit") == 1, second
    assert second["runs"][0]["dtype"] == "torch.bfloat16" and not second["runs"][0]["equal"], second


@pytest.mark.slow
def test_autocast_dtype_change_across_processes_passes_with_fix(tmp_path: Path) -> None:
    first, second = _two_processes(tmp_path, fix=True)
    assert first["states"][AUTOCAST] == second["states"][AUTOCAST] == expected_state(AUTOCAST), (first, second)
    assert second["counters"].get("autograd_cache_hit", 0) == 0, second
    assert first["runs"][0]["equal"] and second["runs"][0]["equal"], (first, second)


@pytest.mark.slow
def test_same_dtype_still_hits_across_processes_with_fix(tmp_path: Path) -> None:
    """Out of the way: the same autocast dtype in a later process is still served from the cache."""
    shared = tmp_path / "shared-cache"
    first = run(AUTOCAST, True, shared, "autocast_runs", "bfloat16")
    second = run(AUTOCAST, True, shared, "autocast_runs", "bfloat16")
    assert first["counters"].get("autograd_cache_miss") == 1, first
    assert second["counters"].get("autograd_cache_hit") == 1 and second["runs"][0]["equal"], second


@pytest.mark.slow
def test_fx_graph_cache_alone_keeps_dtypes_apart(tmp_path: Path) -> None:
    """The FX graph cache is not the hole: with the AOTAutograd cache off (and no fix) the float16
    recompile misses it (its graph holds the casts) and is correct."""
    r = run(AUTOCAST, False, tmp_path, "autocast_runs", ONE_PROCESS, AOT_CACHE="0")
    assert all(run_["equal"] for run_ in r["runs"]), r
    assert r["counters"].get("fxgraph_cache_miss") == 2 and r["counters"].get("fxgraph_cache_hit", 0) == 0, r


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) -------------------


@needs_bug
@pytest.mark.slow
def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it() -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``):
    the float16 recompile served the bfloat16 artifact without the fix, its own with it."""
    off, on = reproduce(AUTOCAST, False), reproduce(AUTOCAST, True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    assert off["outcome"]["measure"].startswith(
        "the float16 recompile was served the bfloat16 artifact (1 AOTAutograd cache hit): output bfloat16 "
        "where eager gives float16, max abs diff "
    ), off
    assert on["outcome"]["result"] == "not-observed" and on["state"] == "applied", on
    assert "both outputs equal to eager in dtype and value (AOTAutograd cache hits 0)" in on["outcome"]["measure"], on


@pytest.mark.skipif(
    "autocast_bug_present()", reason="torch's key ignores the autocast dtype here: the bug test covers it"
)
@pytest.mark.slow
def test_declared_reproduction_shows_no_bug_where_fixed_upstream() -> None:
    off = reproduce(AUTOCAST, False)
    assert off["outcome"]["result"] == "not-observed", off
