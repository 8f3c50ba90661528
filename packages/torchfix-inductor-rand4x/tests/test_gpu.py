"""The real bug (pytorch#198333) on one CUDA GPU: compiled dropout of ``x.transpose(1, 2).contiguous()``,
without checkpointing (the mask's group-of-four repetition) and under checkpointing (forward mask
against the mask the recompute applied), the measurement of the shipped reproduction
(``torchfix_inductor_rand4x.reproduction``).

Run on a CUDA machine with torch, torchfix-core and torchfix-inductor-rand4x installed:

    python -m pytest packages/torchfix-inductor-rand4x/tests -m gpu -v -s

* the declared reproduction as ``torchfix-doctor verify`` runs it (its compile caches off), without
  and with the fix, each in a fresh interpreter with every other fix off; and once with upstream's
  opt-in ``TORCHINDUCTOR_USE_RAND4X=1`` (the 4x path back on every release that has it, 2.15 too);
* the kit's warm-cache orders with ``_scenarios.py gpu`` (FX graph and AOTAutograd caches on, one
  fresh ``TORCHINDUCTOR_CACHE_DIR`` per order): the run with the fix must not be served the ``rand4x``
  kernels the run without it cached (red when its key term is dropped).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _util import FIX, OPT_IN, assert_ok, run
from torchfix_core.testing import (
    CacheStep,
    cache_hits,
    cache_step_arguments,
    cold,
    outside_validated_range,
    reproduce,
    warm_cache_runs,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _print(label: str, r: dict[str, Any]) -> None:
    print(f"\n{label}: {json.dumps(r)}")


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("reproduction-cache"))}
    runs = {
        "off": reproduce(FIX, False, env=env),
        "on": reproduce(FIX, True, env=env, with_report=True),
        "on, opted in": reproduce(FIX, True, env={**env, OPT_IN: "1"}),
    }
    for label, r in runs.items():
        _print(f"declared reproduction, fix {label}", r)
    return runs


def test_dropout_masks_wrong_without_fix(declared: dict[str, dict[str, Any]], bug_present: bool) -> None:
    off = declared["off"]
    assert off["state"] == "disabled", off
    if not bug_present:
        assert off["outcome"]["result"] == "not-observed", off
        return
    assert off["outcome"]["result"] == "observed", off
    assert "part A code: 0 rand4x(" not in off["outcome"]["detail"], off


def test_dropout_masks_right_with_fix(declared: dict[str, dict[str, Any]], bug_present: bool) -> None:
    on = declared["on"]
    assert on["outcome"]["result"] == "not-observed", on
    assert "differ in 0.00% of" in on["outcome"]["measure"], on
    if bug_present and not outside_validated_range(FIX):
        assert on["state"] == "applied", on
        assert on["report"]["events"]["rand4x-declined"] > 0, on["report"]
    assert "did not run" not in on["outcome"]["measure"], on


def test_upstream_opt_in_brings_the_4x_path_back(declared: dict[str, dict[str, Any]], bug_present: bool) -> None:
    """With ``TORCHINDUCTOR_USE_RAND4X=1`` the fix (2.13/2.14) and torch 2.15 alike let the 4x path
    draw: the bug is still in the 4x path, so the reproduction sees it again wherever the path exists."""
    opted = declared["on, opted in"]
    if bug_present:
        assert opted["outcome"]["result"] == "observed", opted


# -- warm caches (the compile caches keyed on the fix) ----------------------------------------------


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory, bug_present: bool) -> dict[str, list[dict[str, Any]]]:
    def step(which: CacheStep, cache: Path) -> dict[str, Any]:
        options, env = cache_step_arguments(FIX, which, cache, bug_present=bug_present)
        r = run("gpu", *options, fix=which.fix, env=env)
        assert_ok(r)
        keys = ("torch", "triton", "device", "a", "b", "harm", "cache", "state", "report")
        _print(f"gpu scenario, fix {which.name}", {k: r.get(k) for k in keys})
        return r

    return warm_cache_runs(step, tmp_path_factory.mktemp("warm-cache"))


def _harmed(r: dict[str, Any]) -> bool:
    return bool(r["harm"]["repeats"] or r["harm"]["differs"])


def test_rand4x_kernels_served_to_the_fix_without_key_term(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term to take away")
    off, on = orders["off, then on without its key term"]
    assert cold(off) and _harmed(off), off
    # the fix applied, but the entry compiled without it is served: the bug comes back from the cache
    assert on["state"] == "applied" and cache_hits(on) >= 1 and _harmed(on), on


def test_rand4x_kernels_not_served_to_the_fix(orders: dict[str, list[dict[str, Any]]], bug_present: bool) -> None:
    off, on, again = orders["off, then on"]
    assert not on["harm"]["errors"] and not _harmed(on), on
    if not bug_present:
        assert not _harmed(off), off
        return
    assert _harmed(off), off
    assert on["state"] == "applied" and cold(on), on
    assert on["report"]["events"]["key-changed"] >= 1 and on["report"]["events"]["rand4x-declined"] >= 1, on
    # the term is the same in every process: the fix's own entries are hit, and stay right
    assert cache_hits(again) >= 1 and not _harmed(again), again


def test_fix_kernels_not_served_without_it(orders: dict[str, list[dict[str, Any]]], bug_present: bool) -> None:
    on, off = orders["on, then off"]
    if not bug_present:
        pytest.skip("the fix does not act on this torch: both processes compile torch's own code")
    assert not _harmed(on), on
    assert off["state"] == "disabled" and cold(off) and _harmed(off), off
