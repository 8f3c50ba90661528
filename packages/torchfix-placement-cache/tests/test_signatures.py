"""Signatures and report counts of the five fixes of torchfix-placement-cache, from their real runs.

Each fix's existing reproduction runs once per module (module-scoped fixtures), with the fix alone
off (the red run, ``only_fix(fix_id, False)``: torch unpatched, the fix ``disabled``) and alone on
(the green run):

* the red runs that raise (``placement-cache``, ``magi-cache-key``: Inductor's size assert when
  an artifact compiled for another layout is loaded) give their captured traceback to
  ``torchfix-doctor explain``, which must name the fix as ``not-installed`` where only the core and the family catalog are
  importable and as ``disabled`` with the fix switched off here;
* the silent ones (``aot-bypass-key``, ``aot-autocast-key``, ``aot-hop-body-key``: a stale or
  foreign artifact, no error) prove themselves through the report: the green run counted its
  events (``acted > 0``), the red run counted nothing (``acted == 0``) and still shows the symptom.

Where a bug is absent on the running torch (fixed upstream, or outside the fix's range) its tests
skip with the reason. ``magi-cache-key`` needs MagiCompiler installed.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any, Callable

import pytest
from torchfix_core.testing import (
    assert_explained_both_ways,
    failure_text,
    only_fix,
    outside_validated_range,
)

pytestmark = pytest.mark.filterwarnings("ignore")

PLACEMENT = "placement-cache"
MAGI = "magi-cache-key"
BYPASS = "aot-bypass-key"
AUTOCAST = "aot-autocast-key"
HOP_BODY = "aot-hop-body-key"


def _needs_range(fix_id: str) -> None:
    reason = outside_validated_range(fix_id)
    if reason is not None:
        pytest.skip(f"{fix_id} is outside its validated range here: {reason}")


_RUN_NAME = {False: "red", True: "green"}
#: why a fix's red/green pair skips where its bug probe finds no bug on the running torch
_NO_BUG = {
    "placement-cache": "torch's DTensor AOTAutograd key tells uneven local shards apart here (no false hit)",
    "aot-bypass-key": "torch's fallback key is already unique per call here (or there is none)",
    "aot-autocast-key": "torch keys the autocast dtype itself here",
    "aot-hop-body-key": "check_cacheable checks nested bodies here",
}


def _red_green(
    fix_id: str, bug_present: Callable[[], bool], tmp: pytest.TempPathFactory, run: Callable[[bool, Path], Any]
) -> dict[str, Any]:
    """``{"red": run(False, dir), "green": run(True, dir)}``: ``fix_id``'s reproduction without and
    with the fix, in that order, each with a fresh directory ``<fix_id>-red`` / ``-green``; skipped
    where the fix is outside its validated range, or where ``bug_present()`` says this torch has no
    bug (:data:`_NO_BUG` says why)."""
    _needs_range(fix_id)
    if not bug_present():
        pytest.skip(_NO_BUG[fix_id])
    return {name: run(fix, tmp.mktemp(f"{fix_id}-{name}")) for fix, name in _RUN_NAME.items()}


def _assert_counted_nothing(report: dict[str, Any], fix_id: str) -> None:
    assert report["state"] == "disabled" and report["acted"] == 0, (fix_id, report)


# --- placement-cache: 2 gloo ranks, global (3, 8) Shard(0), one shared TORCHINDUCTOR_CACHE_DIR ----------


@pytest.fixture(scope="module")
def placement_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    from _multirank import run_job
    from _placement_cache_util import bug_present

    return _red_green(
        PLACEMENT,
        bug_present,
        tmp_path_factory,
        lambda fix, _: run_job("uneven", world=2, env=only_fix(PLACEMENT, fix)),
    )


def _placement_failure(runs: dict[str, list[dict[str, Any]]]) -> str:
    rank1 = runs["red"][1]  # local (1, 8): loads rank 0's artifact compiled for (2, 8)
    assert rank1["counters"]["autograd_cache_hit"] == 1 and not rank1["ok"], rank1
    assert "expected size 1==2" in rank1["error"], rank1
    return failure_text(rank1)


def test_placement_cache_failure_is_explained_not_installed_and_disabled(placement_runs: dict[str, Any]) -> None:
    assert_explained_both_ways(_placement_failure(placement_runs), PLACEMENT)


def test_placement_cache_report_counts_changed_keys(placement_runs: dict[str, Any]) -> None:
    for rank in placement_runs["green"]:
        assert rank["ok"] and rank["torchfix"]["state"] == "applied", rank
        assert rank["torchfix"]["acted"] > 0 and rank["torchfix"]["events"]["key-changed"] >= 1, rank
    for rank in placement_runs["red"]:
        _assert_counted_nothing(rank["torchfix"], PLACEMENT)


# --- magi-cache-key: a SimpleFSDP-style module, Shard(0) then Replicate(), one Magi cache root -----------

needs_magi = pytest.mark.skipif(
    importlib.util.find_spec("magi_compiler") is None, reason="magi_compiler is not installed (nox -s magi installs it)"
)


@pytest.fixture(scope="module")
def magi_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The red pair of test_magi_cache_key (without torchfix), with the all-gather style and the
    input-count neutralisation that its live warm-start check picks on this torch."""
    from test_magi_cache_key import GATHERS, job

    choice = None
    for gather in GATHERS:  # test_magi_cache_key's warm_start check, one rank
        root = tmp_path_factory.mktemp(f"magi-warm-{gather}")
        runs = [job(root, "shard", world=1, fix=False, gather=gather)[0] for _ in range(2)]
        if runs[0]["artifacts_saved"] > 0:
            choice = {"gather": gather, "neutralize_input_count": runs[1]["loads_refused"] > 0}
            break
    if choice is None:
        pytest.skip("Magi persists no artifact of a DTensor graph on this torch: nothing to load wrongly")
    root = tmp_path_factory.mktemp("magi-red")
    job(root, "shard", fix=False, **choice)
    red = job(root, "replicate", fix=False, **choice)
    green = job(tmp_path_factory.mktemp("magi-green"), "shard", world=1, fix=True, **choice)
    return {"red": red, "green": green, "choice": choice}


def _magi_failure(runs: dict[str, Any]) -> str:
    rank0 = runs["red"][0]
    assert rank0["inductor_compiles"] == 0 and rank0["error"].startswith("AssertionError: expected size"), runs
    return failure_text(rank0)


@needs_magi
def test_magi_cache_key_failure_is_explained_not_installed_and_disabled(magi_runs: dict[str, Any]) -> None:
    assert_explained_both_ways(_magi_failure(magi_runs), MAGI)


@needs_magi
def test_magi_cache_key_report_counts_changed_keys(magi_runs: dict[str, Any]) -> None:
    (green,) = magi_runs["green"]
    assert green["ok"] and green["state"] == "applied", green
    assert green["report"]["acted"] > 0 and green["report"]["events"]["key-changed"] >= 1, green
    for rank in magi_runs["red"]:  # TORCHFIX_AUTOLOAD=0: nothing applied, nothing counted
        assert rank["report"]["acted"] == 0, rank


# --- aot-bypass-key: two AOT compiles of unkeyable graphs from one Python random state ------------------


@pytest.fixture(scope="module")
def bypass_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from _aot_bypass_key_util import SEEDED, bug_present, run

    return _red_green(BYPASS, bug_present, tmp_path_factory, lambda fix, tmp: run(SEEDED, tmp, fix=fix))


def test_aot_bypass_key_report_counts_changed_keys(bypass_runs: dict[str, dict[str, Any]]) -> None:
    green = bypass_runs["green"]
    assert green["f_ok"] and green["g_ok"] and green["report"]["state"] == "applied", green
    assert green["report"]["events"]["key-changed"] == 2, green  # one uuid4 key per AOT compile


def test_aot_bypass_key_red_run_counts_nothing_and_shows_the_symptom(bypass_runs: dict[str, dict[str, Any]]) -> None:
    red = bypass_runs["red"]
    _assert_counted_nothing(red["report"], BYPASS)
    assert red["aot"].get("autograd_cache_hit") == 1 and not red["g_ok"], red  # g served f's artifact


# --- aot-autocast-key: one function under bfloat16 then float16 autocast, one process -------------------


@pytest.fixture(scope="module")
def cache_key_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, dict[str, Any]]]:
    """``cache_key_runs(fix_id)``: the red/green pair of ``aot-autocast-key`` or ``aot-hop-body-key``
    (one ``_aot_cache_key_util`` scenario each), run on first use and kept for the module."""
    import _aot_cache_key_util as util

    scenarios = {
        AUTOCAST: (util.autocast_bug_present, "autocast_runs", "bfloat16,float16"),
        HOP_BODY: (util.hop_bug_present, "checkpointed", "opaque"),
    }

    @functools.cache
    def runs(fix_id: str) -> dict[str, dict[str, Any]]:
        bug_present, scenario, arg = scenarios[fix_id]
        return _red_green(
            fix_id, bug_present, tmp_path_factory, lambda fix, tmp: util.run(fix_id, fix, tmp, scenario, arg)
        )

    return runs


def test_aot_autocast_key_report_counts_changed_keys(
    cache_key_runs: Callable[[str], dict[str, dict[str, Any]]],
) -> None:
    green = cache_key_runs(AUTOCAST)["green"]
    report = green["reports"][AUTOCAST]
    assert report["state"] == "applied" and all(r["equal"] for r in green["runs"]), green
    # both compiles keyed under autocast: the key names each dtype
    assert report["events"]["autocast-dtype-keyed"] >= 2 and report["events"]["key-changed"] >= 2, green


def test_aot_autocast_key_red_run_counts_nothing_and_shows_the_symptom(
    cache_key_runs: Callable[[str], dict[str, dict[str, Any]]],
) -> None:
    red = cache_key_runs(AUTOCAST)["red"]
    _assert_counted_nothing(red["reports"][AUTOCAST], AUTOCAST)
    fp16 = red["runs"][1]
    assert fp16["dtype"] == "torch.bfloat16" and fp16["eager_dtype"] == "torch.float16", red  # no exception


# --- aot-hop-body-key: an opaque callable in a checkpoint body, one process -------------------------------


def test_aot_hop_body_key_report_counts_bypassed_bodies(
    cache_key_runs: Callable[[str], dict[str, dict[str, Any]]],
) -> None:
    green = cache_key_runs(HOP_BODY)["green"]
    report = green["reports"][HOP_BODY]
    assert report["state"] == "applied" and green["out_ok"] and green["grad_ok"], green
    assert report["events"]["body-bypassed"] >= 1, green
    assert green["counters"].get("autograd_cache_bypass", 0) >= 1, green


def test_aot_hop_body_key_red_run_counts_nothing(cache_key_runs: Callable[[str], dict[str, dict[str, Any]]]) -> None:
    red = cache_key_runs(HOP_BODY)["red"]
    _assert_counted_nothing(red["reports"][HOP_BODY], HOP_BODY)
    assert red["counters"].get("autograd_cache_saved") == 1, red  # cached: a later process would get it
