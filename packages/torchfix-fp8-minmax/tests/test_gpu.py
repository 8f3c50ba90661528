"""The real miscompile (triton-lang/triton#11111) on one CUDA GPU: Inductor's compiled fp8 cast with
a transposed copy, every launch config it compiled, compared bytewise with eager (the sweep of the
shipped reproduction, ``torchfix_fp8_minmax.reproduction``).

Run on a CUDA machine with torch, torchfix-core and torchfix-fp8-minmax installed:

    python -m pytest packages/torchfix-fp8-minmax/tests -m gpu -v -s

``_scenarios.py gpu`` runs once with the fix disabled and then once with it on, each in a fresh
interpreter with every other torchfix fix disabled, both on one fresh ``TORCHINDUCTOR_CACHE_DIR``:
the run with the fix must not be served the kernels the run without it cached (the key term).
Then the declared reproduction as ``torchfix-doctor verify`` runs it (its compile caches off).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _util import FIX, assert_ok, run
from torchfix_core.testing import outside_validated_range, reproduce

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("inductor-cache"))


def _gpu(fix: bool, cache_dir: Path) -> dict[str, Any]:
    r = run("gpu", fix=fix, env={"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)})
    assert_ok(r)
    keys = ("torch", "triton", "device", "configs_run", "configs_red", "propagate_nan_in_code", "cache", "report")
    print(f"\ngpu scenario, fix {'on' if fix else 'off'}: " + json.dumps({k: r[k] for k in keys}))
    for case in r["cases"]:
        print("  case " + json.dumps(case))
    return r


@pytest.fixture(scope="module")
def red(cache_dir: Path) -> dict[str, Any]:
    return _gpu(False, cache_dir)


@pytest.fixture(scope="module")
def green(red: dict[str, Any], cache_dir: Path) -> dict[str, Any]:
    return _gpu(True, cache_dir)  # after ``red``: its entries are in the cache directory


def test_fp8_transposed_store_fails_without_fix(red: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("this torch emits no PropagateNan min/max")
    outside = outside_validated_range(FIX)
    if outside:
        pytest.skip(f"outside the validated range ({outside}): torch 2.15 / Triton 3.9 wrote eager's bytes")
    assert red["propagate_nan_in_code"] is True, red
    assert red["configs_red"] > 0, red["cases"]


def test_fp8_transposed_store_passes_with_fix(green: dict[str, Any], bug_present: bool) -> None:
    assert green["configs_red"] == 0, green["cases"]
    if green["state"] != "applied":
        assert not bug_present or outside_validated_range(FIX), green
        return
    assert green["propagate_nan_in_code"] is False, green
    # compiled afresh: not served the kernels the run without the fix cached
    assert green["cache"]["fxgraph_hit"] == 0 and green["cache"]["fxgraph_miss"] > 0, green["cache"]


def test_fp8_report_counts_with_fix(green: dict[str, Any], red: dict[str, Any]) -> None:
    assert red["report"]["state"] == "disabled" and red["report"]["acted"] == 0, red["report"]
    if green["state"] != "applied":
        assert green["report"]["acted"] == 0, green["report"]
        return
    assert green["report"]["events"]["where-min-max-emitted"] > 0, green["report"]
    assert green["report"]["events"]["key-changed"] > 0, green["report"]


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(
    bug_present: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``,
    every other fix off): launch configs writing other bytes than eager without the fix on torch 2.14 /
    Triton 3.8, none with it; outside the validated range (2.11: the ``tl.where`` helpers; 2.15: Triton
    3.9) none either way."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("reproduction-cache"))}
    off, on = reproduce(FIX, False, env=env), reproduce(FIX, True, env=env)
    print(f"\ndeclared reproduction, fix off: {off}\ndeclared reproduction, fix on: {on}")
    if off["outcome"]["result"] == "cannot-run":
        pytest.skip(off["outcome"]["detail"])
    assert on["outcome"]["result"] == "not-observed", on
    assert "0 bytes differing" in on["outcome"]["measure"], on
    assert off["state"] == "disabled", off
    if bug_present and not outside_validated_range(FIX):
        assert off["outcome"]["result"] == "observed", off
        assert "the kernels use the PropagateNan min/max: yes" in off["outcome"]["detail"], off
        assert on["state"] == "applied", on
        assert "the kernels use the PropagateNan min/max: no" in on["outcome"]["detail"], on
    else:
        assert off["outcome"]["result"] == "not-observed", off
