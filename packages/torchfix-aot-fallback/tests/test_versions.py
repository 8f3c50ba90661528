"""Out of the validated range (torch 2.10: ``aot_compile_fullgraph`` has no ``dynamic`` parameter)
the fix is a graceful no-op: state out-of-range, nothing patched, torch behaves as without it; the
declared reproduction still shows the bug there (or, without an AOT compile at all, cannot run)."""

from __future__ import annotations

import importlib.util

import pytest
from _helpers import IN_RANGE, run, write_models
from torchfix_core.testing import reproduce

pytestmark = pytest.mark.skipif(IN_RANGE, reason="only meaningful outside the validated range")
#: torch 2.8 has no AOT precompile at all (no torch._dynamo.aot_compile): the fix's trigger never fires
NO_AOT = importlib.util.find_spec("torch._dynamo.aot_compile") is None
needs_aot = pytest.mark.skipif(NO_AOT, reason="torch has no torch._dynamo.aot_compile")

NOOP = """
import torchfix_core
from aotfb_models import graph_break
import torch._dynamo.aot_compile as aot
try:
    torch.compile(graph_break, fullgraph=True, backend=BACKEND).aot_compile(((torch.randn(4),), {}))
    raised = None
except Exception as e:
    raised = type(e).__name__
emit(state=fix_state(), raised=raised, wrapped=hasattr(aot.aot_compile_fullgraph, "__torchfix_fix__"))
"""


@needs_aot
def test_out_of_range_is_a_graceful_noop(tmp_path):
    write_models(tmp_path)
    r = run(NOOP, tmp_path)
    assert r["state"][0] == "out-of-range" and r["raised"] == "Unsupported" and r["wrapped"] is False, r


@needs_aot
def test_forced_on_unknown_layout_refuses_cleanly(tmp_path):
    write_models(tmp_path)
    r = run(NOOP, tmp_path, env={"TORCHFIX_FORCE": "aot-fallback"})
    assert r["state"][0] == "failed" and "refused" in r["state"][1] and r["wrapped"] is False, r


def test_declared_reproduction_outside_the_range():
    """``verify --all`` on such a torch: the fix stays out of range even switched on, and the
    reproduction shows torch's own behaviour, ``Unsupported`` (no torch has a JIT fallback); a torch
    without an AOT compile (2.8) cannot run it, and the fix stays pending there."""
    r = reproduce("aot-fallback", True)
    if NO_AOT:  # the trigger never fires: the fix stays pending
        assert r["state"] == "pending", r
        assert r["outcome"]["result"] == "cannot-run" and "has no AOT compile" in r["outcome"]["detail"], r
        return
    assert r["state"] == "out-of-range", r
    assert r["outcome"]["result"] == "observed" and r["outcome"]["measure"].startswith("Unsupported: "), r
