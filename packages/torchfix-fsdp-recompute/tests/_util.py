"""Helpers of the fsdp-recompute tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest
from torchfix_core.testing import fix_switch, only_fix, run_json_script

#: the scenarios, shipped in the wheel with the declared reproductions (``python -m`` it)
SCENARIOS = "torchfix_fsdp_recompute.reproduction"
CAST = "fsdp-recompute-cast"
UNSHARD = "fsdp-recompute-unshard"
MODULE = "torch.distributed.fsdp._fully_shard._fsdp_state"

#: Upstream's fix of each bug, by the id of the fix that backports it. Read from torch's own source
#: file, never from the live class: a fix may have replaced ``FSDPState._pre_forward`` in this
#: interpreter (the combination suite applies a subset's other fixes in every interpreter, also under
#: ``TORCHFIX_AUTOLOAD=0``, and fsdp-recompute-cast patches the method whose code the unshard check
#: reads). PR #182580 added ``FSDPState._cast_forward_inputs``; PR #171779 made ``_pre_forward`` read
#: ``is_unsharded``.
UPSTREAM_PR = {CAST: "#182580", UNSHARD: "#171779"}
_UPSTREAM = f"""
import ast, importlib.util, json, os
root = importlib.util.find_spec("torch").submodule_search_locations[0]
path = os.path.join(root, *"{MODULE}".split(".")[1:]) + ".py"
with open(path, encoding="utf-8") as handle:
    tree = ast.parse(handle.read())
[state] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FSDPState"]
methods = {{n.name: n for n in state.body if isinstance(n, ast.FunctionDef)}}
reads = {{n.attr for n in ast.walk(methods["_pre_forward"]) if isinstance(n, ast.Attribute)}}
print(json.dumps({{"{CAST}": "_cast_forward_inputs" in methods, "{UNSHARD}": "is_unsharded" in reads}}))
"""


@functools.cache
def _upstream_fixes() -> dict[str, bool]:
    return run_json_script(["-c", _UPSTREAM], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=300)


def carries_upstream_fix(fix_id: str) -> bool:
    """Whether this torch carries upstream's fix of ``fix_id``'s bug (``UPSTREAM_PR``), from its
    source file (a fresh interpreter that does not import torch; once per test process)."""
    return _upstream_fixes()[fix_id]


def needs_bug(*fix_ids: str) -> pytest.MarkDecorator:
    """Skip where this torch carries upstream's fix of any bug of ``fix_ids`` (no red run there)."""
    carried = [UPSTREAM_PR[fix_id] for fix_id in fix_ids if carries_upstream_fix(fix_id)]
    return pytest.mark.skipif(bool(carried), reason=f"torch carries upstream PR {', '.join(carried)}")


def fixed_upstream(fix_id: str) -> pytest.MarkDecorator:
    """Skip where this torch lacks upstream's fix of ``fix_id``'s bug (the fix is needed there)."""
    reason = f"torch lacks upstream PR {UPSTREAM_PR[fix_id]}"
    return pytest.mark.skipif(not carries_upstream_fix(fix_id), reason=reason)


def run(scenario: str, world: int = 1, env: dict[str, str] | None = None, *options: str) -> dict[str, Any]:
    """One scenario in a fresh interpreter (``world`` spawned ranks); ``env`` as the test sets it."""
    return run_json_script(["-m", SCENARIOS, scenario, str(world), *options], env=env or {}, timeout=600)


def alone(fix_id: str, on: bool) -> dict[str, str]:
    """Only ``fix_id``, on or off (every other fix disabled)."""
    return only_fix(fix_id, on)


def both(on: bool = True) -> dict[str, str]:
    """Both fixes of this package on (or off), every other fix disabled."""
    return {**only_fix(CAST, on), **fix_switch(UNSHARD, on)}


#: the world sizes of a reproduction: one rank (the default set) and two (``slow``: 30-60 s each on a
#: loaded 2-core machine)
RANKS = pytest.mark.parametrize(
    "world", [pytest.param(1, id="one-rank"), pytest.param(2, id="two-ranks", marks=pytest.mark.slow)]
)
DTYPE_ERROR = "mat1 and mat2 must have the same dtype"
MIXED_ERROR = "got mixed torch.Tensor and DTensor"


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """One fix's reproduction: its scenario (``torchfix_fsdp_recompute.reproduction``) and the error the scenario raises on
    the real, unpatched torch (a substring of the message, which starts with ``error_start``)."""

    scenario: str
    error: str
    error_start: str = ""


REPRODUCTIONS = {
    # pytorch#159359: HF-style checkpoint around each fully_shard-ed block, bf16 param_dtype, fp32 input
    CAST: Reproduction("cast", f"{DTYPE_ERROR}, but got Float and BFloat16"),
    # pytorch#187437: checkpoint(m), fully_shard(m.fc1), (m(x1) * m(x2)).sum().backward(); the op
    # is named "aten.addmm.default got mixed ..." (2.10), "aten.addmm.default: got mixed ..." (2.8, 2.9)
    UNSHARD: Reproduction("unshard", MIXED_ERROR, error_start="aten.addmm.default"),
}


def assert_fails(r: dict[str, Any], message: str) -> None:
    assert r["ok"] is False, f"the bug did not reproduce on torch {r['torch']}: {r}"
    assert r["error_type"] == "builtins.RuntimeError", r
    assert message in r["error"], r["error"]


def assert_red(fix_id: str, world: int) -> dict[str, Any]:
    """Run ``fix_id``'s reproduction on ``world`` ranks with ``fix_id`` alone switched off; assert it
    is ``disabled`` and the run fails with the reproduction's error. Returns the run."""
    repro = REPRODUCTIONS[fix_id]
    r = run(repro.scenario, world, alone(fix_id, False))
    assert r["states"][fix_id] == "disabled", r
    assert_fails(r, repro.error)
    assert r["error"].startswith(repro.error_start), r["error"]
    return r


def assert_green(r: dict[str, Any], states: dict[str, str]) -> None:
    """Assert the run trained bit-identically to the model without checkpointing, each fix of
    ``states`` (fix id -> state) in its state."""
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')} ({r})"
    # the recompute runs the forward's ops on the forward's inputs: bit-identical to no checkpoint
    assert r["grads_equal"] is True and r["max_abs_diff"] == 0.0, r
    for fix_id, state in states.items():
        assert r["states"][fix_id] == state, r
