"""AOT compile of an AOT-unsupported model: red without the fix, JIT fallback with it; errors
that are not "AOT unsupported" propagate unchanged on both the AOT and the JIT path."""

from __future__ import annotations

import pytest
from _helpers import IN_RANGE, run, run_with_models
from torchfix_core.testing import reproduce

pytestmark = pytest.mark.skipif(not IN_RANGE, reason="torch outside the validated range (see test_versions.py)")
FIX_ID = "aot-fallback"

# the scenario behind the declared reproduction, shipped in the wheel (torchfix_aot_fallback.reproduction)
GRAPH_BREAK_AOT = """
from torchfix_aot_fallback.reproduction import graph_break_aot
emit(**graph_break_aot(), state=fix_state())
"""
MODEL = "torchfix_aot_fallback.reproduction.graph_break"


def test_graph_break_aot_compile_fails_without_fix(tmp_path):
    r = run(GRAPH_BREAK_AOT, tmp_path, disable=True)
    assert r["raised"] == "Unsupported", r
    assert "graph_break" in r["msg"]
    assert r["state"][0] == "disabled", r


def test_graph_break_aot_compile_passes_with_fix(tmp_path):
    r = run(GRAPH_BREAK_AOT, tmp_path)
    assert r["raised"] is None, r
    assert r["type"] == "JITFallback" and r["match"] is True
    assert r["records"] == ["compile"]
    state, reason = r["state"]
    assert state == "applied" and "1 compile" in reason and MODEL in reason
    warnings = [line for line in r["stderr"].splitlines() if f"AOT compile of {MODEL} is unsupported" in line]
    assert len(warnings) == 1, r["stderr"]
    # the fix's memo went to the scenario's own temporary directory, not the run's Inductor cache
    assert not (tmp_path / "inductor" / "torchfix").exists()


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it():
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``,
    every other fix off): ``Unsupported`` without the fix, a JIT fallback equal to eager with it."""
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    assert off["outcome"]["measure"].startswith("Unsupported: "), off
    assert "graph_break" in off["outcome"]["measure"], off
    assert on["outcome"] == {
        "result": "not-observed",
        "measure": "AOT compile of a graph-breaking function returned JITFallback; its output against eager: "
        "max abs diff 0",
        "detail": "",
    }, on
    assert on["state"] == "applied", on


def test_declared_reproduction_twice_makes_the_aot_attempt_each_time(tmp_path):
    """Deterministic: the memo the first run wrote (its own temporary directory) never turns the
    second into a memo skip, whatever Inductor cache directory the two share."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first, second = reproduce(FIX_ID, True, env=env), reproduce(FIX_ID, True, env=env)
    assert first["outcome"] == second["outcome"] and first["outcome"]["result"] == "not-observed", (first, second)
    assert not (tmp_path / "inductor" / "torchfix").exists()


DIRECT = """
from aotfb_models import graph_break
from torch._dynamo.aot_compile import aot_compile_fullgraph as _unused  # noqa: F401 (imports the module)
import torch._dynamo.aot_compile as aot
from torch._dynamo.hooks import Hooks
x = torch.randn(16)
try:
    fn = aot.aot_compile_fullgraph(graph_break, ((x,), {}), Hooks(), torch._dynamo.lookup_backend(BACKEND))
except Exception as e:
    emit(raised=type(e).__name__)
else:
    emit(raised=None, match=bool(torch.allclose(fn(x), graph_break(x))))
"""


def test_direct_aot_compile_fullgraph_fails_without_fix(tmp_path):
    assert run_with_models(DIRECT, tmp_path, disable=True)["raised"] == "Unsupported"


def test_direct_aot_compile_fullgraph_passes_with_fix(tmp_path):
    r = run_with_models(DIRECT, tmp_path)
    assert r["raised"] is None and r["match"] is True, r


PROPAGATION = """
from aotfb_models import plain
x = torch.randn(16)
def assert_backend(gm, example_inputs):
    raise AssertionError("boom-assert")
def oom_backend(gm, example_inputs):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB (boom-oom)")
def kbi_backend(gm, example_inputs):
    raise KeyboardInterrupt
def user_model(x):
    raise ValueError("user error from the model")
out = {}
for name, backend in (("assert", assert_backend), ("oom", oom_backend), ("kbi", kbi_backend)):
    for path in ("aot", "jit"):
        c = torch.compile(plain, fullgraph=True, backend=backend)
        try:
            c.aot_compile(((x,), {})) if path == "aot" else c(x)
            out[f"{name}-{path}"] = "no error"
        except BaseException as e:
            inner = getattr(e, "inner_exception", None)
            out[f"{name}-{path}"] = type(e).__name__ + ("/" + type(inner).__name__ if inner is not None else "")
try:
    torch.compile(user_model, fullgraph=True, backend=BACKEND).aot_compile(((x,), {}))
    out["user-aot"] = "no error"
except BaseException as e:
    out["user-aot"] = type(e).__name__ + "/" + type(e.__cause__).__name__
c = torch.compile(plain, backend=BACKEND)  # fullgraph=False: misuse, not 'unsupported'
try:
    c.aot_compile(((x,), {}))
    out["misuse-aot"] = "no error"
except BaseException as e:
    out["misuse-aot"] = type(e).__name__
from torchfix_aot_fallback import api
emit(out=out, records=len(api.fallbacks()), state=fix_state()[0])
"""


@pytest.mark.parametrize("disable", [True, False], ids=["without_fix", "with_fix"])
def test_assertion_oom_keyboardinterrupt_and_user_errors_propagate(tmp_path, disable):
    """Same exception types with and without the fix: nothing is converted into a fallback."""
    r = run_with_models(PROPAGATION, tmp_path, disable=disable)
    out = r["out"]
    assert out["assert-aot"] == "AssertionError"
    assert out["assert-jit"] == "BackendCompilerFailed/AssertionError"
    assert out["oom-aot"] == "OutOfMemoryError"
    assert out["oom-jit"] == "BackendCompilerFailed/OutOfMemoryError"
    assert out["kbi-aot"] == "KeyboardInterrupt"
    assert out["kbi-jit"].startswith("KeyboardInterrupt") or out["kbi-jit"].startswith("BackendCompilerFailed"), out
    assert out["user-aot"].startswith("Unsupported/Observed"), out
    assert out["misuse-aot"] == "RuntimeError"
    assert r["records"] == 0
    assert r["state"] == ("disabled" if disable else "applied")


STRICT = """
from aotfb_models import graph_break
from torchfix_aot_fallback import api
x = torch.randn(16)
if os.environ.get("USE_API") == "1":
    api.set_strict(True)
try:
    torch.compile(graph_break, fullgraph=True, backend=BACKEND).aot_compile(((x,), {}))
    emit(raised=None)
except Exception as e:
    emit(raised=type(e).__name__, records=len(api.fallbacks()), strict=api.is_strict())
"""


@pytest.mark.parametrize("how", ["env", "api", "torch_strict_precompile"])
def test_strict_mode_propagates_original_error(tmp_path, how):
    env = {
        "env": {"TORCHFIX_AOT_FALLBACK_STRICT": "1"},
        "api": {"USE_API": "1"},
        "torch_strict_precompile": {"TORCH_STRICT_PRECOMPILE": "1"},
    }[how]
    r = run_with_models(STRICT, tmp_path, env=env)
    assert r["raised"] == "Unsupported" and r["records"] == 0 and r["strict"] is True, r
