"""GPU checks (run by the lead on a CUDA machine): a *real* CUDA OOM inside the backend propagates on
the AOT and the JIT path with the fix applied, and a CUDA graph-break model falls back to JIT.

    python -m pytest packages/torchfix-aot-fallback/tests -m gpu -v
"""

from __future__ import annotations

import pytest
import torch
from _helpers import IN_RANGE, run_with_models

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(not IN_RANGE, reason="torch outside the validated range"),
]

REAL_OOM = """
from aotfb_models import plain
x = torch.randn(16, device="cuda")
def oom_backend(gm, example_inputs):
    torch.empty(1 << 48, dtype=torch.uint8, device="cuda")  # 256 TiB: a real CUDA OOM
    return gm.forward
out = {}
for path in ("aot", "jit"):
    c = torch.compile(plain, fullgraph=True, backend=oom_backend)
    try:
        c.aot_compile(((x,), {})) if path == "aot" else c(x)
        out[path] = "no error"
    except BaseException as e:
        inner = getattr(e, "inner_exception", None)
        out[path] = type(e).__name__ + ("/" + type(inner).__name__ if inner is not None else "")
from torchfix_aot_fallback import api
emit(out=out, records=len(api.fallbacks()), state=fix_state()[0])
"""


def test_real_cuda_oom_in_backend_propagates_with_fix(tmp_path):
    r = run_with_models(REAL_OOM, tmp_path)
    assert r["state"] == "applied", r
    assert r["out"]["aot"] == "OutOfMemoryError", r
    assert r["out"]["jit"] == "BackendCompilerFailed/OutOfMemoryError", r
    assert r["records"] == 0


CUDA_GRAPH_BREAK = """
from aotfb_models import graph_break
x = torch.randn(1024, device="cuda")
try:
    fn = torch.compile(graph_break, fullgraph=True, backend="inductor").aot_compile(((x,), {}))
    emit(raised=None, type=type(fn).__name__, match=bool(torch.allclose(fn(x), graph_break(x), atol=1e-5)))
except Exception as e:
    emit(raised=type(e).__name__)
"""


def test_cuda_graph_break_aot_compile_fails_without_fix(tmp_path):
    assert run_with_models(CUDA_GRAPH_BREAK, tmp_path, disable=True)["raised"] == "Unsupported"


def test_cuda_graph_break_aot_compile_passes_with_fix(tmp_path):
    r = run_with_models(CUDA_GRAPH_BREAK, tmp_path)
    assert r["raised"] is None and r["type"] == "JITFallback" and r["match"] is True, r
