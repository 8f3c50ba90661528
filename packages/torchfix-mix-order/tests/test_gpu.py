"""The real bug (pytorch#193061) on one CUDA GPU: the compiled backward of two LayerNorms modulated by
the chunks of one shared table, whose gradient chunks are views into the table's gradient (the shipped
reproduction's case, ``torchfix_mix_order.reproduction``).

Run on a CUDA machine with torch, torchfix-core and torchfix-mix-order installed:

    python -m pytest packages/torchfix-mix-order/tests -m gpu -v -s

First the declared reproduction as ``torchfix-doctor verify`` runs it (compile caches off), without
and with the fix, through ``torchfix_core.testing.reproduce``. Then the warm-cache orders
(``torchfix_core.testing.warm_cache_runs``): ``_scenarios.py gpu`` in fresh interpreters sharing one
``TORCHINDUCTOR_CACHE_DIR`` per order, the FX graph and AOTAutograd caches on: fix off then on (the
backward cached without the fix is not served: every chunk written), on then off, and off then on
without its key term (the red half: the cached backward is served and the chunks stay unwritten).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _util import FIX, assert_ok, run
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


def _applies(bug_present: bool) -> bool:
    return bug_present and not outside_validated_range(FIX)


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_chunk_gradients_never_written_without_fix_and_written_with_it(
    bug_present: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``,
    every other fix off): chunks of the table gradient never written without the fix on torch 2.11-2.14,
    every chunk at eager float32's error with it; on 2.15 (upstream's fix) every chunk written either way."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("reproduction-cache"))}
    off, on = reproduce(FIX, False, env=env), reproduce(FIX, True, env=env)
    # the lines the demo reads from a recorded run of this test (print_recorded_gpu_run)
    print(f"\ngpu scenario, fix off: {json.dumps(off)}\ngpu scenario, fix on: {json.dumps(on)}")
    if off["outcome"]["result"] == "cannot-run":
        pytest.skip(off["outcome"]["detail"])
    assert off["state"] == "disabled", off
    assert on["outcome"]["result"] == "not-observed", on
    assert "every chunk written" in on["outcome"]["measure"], on
    if _applies(bug_present):
        assert off["outcome"]["result"] == "observed", off
        assert "never written" in off["outcome"]["measure"], off
        assert on["state"] == "applied", on
    else:
        assert off["outcome"]["result"] == "not-observed", off


# -- the warm-cache orders -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory, bug_present: bool) -> dict[str, list[dict[str, Any]]]:
    def step(which: CacheStep, cache: Path) -> dict[str, Any]:
        options, env = cache_step_arguments(FIX, which, cache, bug_present=bug_present)
        r = run("gpu", *options, fix=which.fix, env=env)
        assert_ok(r)
        keys = ("torch", "device", "wrong", "nonfinite", "stale", "mix_order_kernels", "cache", "report")
        print(f"\nwarm cache, {which.name}: " + json.dumps({k: r[k] for k in keys}))
        return r

    return warm_cache_runs(step, tmp_path_factory.mktemp("warm-cache"))


def test_backward_cached_without_fix_served_without_key_term(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term to take away")
    off, on = orders["off, then on without its key term"]
    assert cold(off) and off["wrong"], off
    # the fix applied, but its term dropped: the backward compiled without it is served, the bug stays
    assert cache_hits(on) >= 1 and on["wrong"], on


def test_backward_cached_without_fix_not_served_with_fix(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    off, on, again = orders["off, then on"]
    assert cold(off), off["cache"]
    if not bug_present:
        assert off["wrong"] == [] and on["wrong"] == [], (off, on)
        return
    assert off["wrong"], off
    assert on["state"] == "applied" and cold(on), on
    assert on["wrong"] == [] and on["report"]["events"]["view-written"] >= 1, on
    # the term is the same in every process: the third one reuses the second one's backward
    assert cache_hits(again) >= 1 and again["wrong"] == [], again


def test_backward_cached_with_fix_not_served_without_it(
    orders: dict[str, list[dict[str, Any]]], bug_present: bool
) -> None:
    on, off = orders["on, then off"]
    assert cold(on), on["cache"]
    if not bug_present:
        pytest.skip("the fix does not act on this torch: both processes compile torch's own code")
    assert on["wrong"] == [], on
    assert off["state"] == "disabled" and cold(off), off
