"""Guard-mismatch loads fall back to JIT; the failure memo skips the doomed attempt in the next
process and is invalidated by a source change; build-once/load-many helper."""

from __future__ import annotations

import pytest
from _helpers import IN_RANGE, run, write_models

pytestmark = pytest.mark.skipif(not IN_RANGE, reason="torch outside the validated range (see test_versions.py)")

SAVE = """
from aotfb_models import plain
fn = torch.compile(plain, fullgraph=True, backend=BACKEND).aot_compile(((torch.randn(16),), {}))
fn.save_compiled_function(os.environ["ARTIFACT"])
emit(saved=True)
"""

LOAD_OTHER_SHAPE = """
import aotfb_models
from aotfb_models import plain
with open(os.environ["ARTIFACT"], "rb") as f:
    fn = torch.compiler.load_compiled_function(f)
same = torch.randn(16)
other = torch.randn(4, 3)
ok_same = bool(torch.allclose(fn(same), plain(same)))
try:
    out = fn(other)
except Exception as e:
    emit(ok_same=ok_same, raised=type(e).__name__, msg=str(e).splitlines()[0])
else:
    from torchfix_aot_fallback import api
    emit(ok_same=ok_same, raised=None, match=bool(torch.allclose(out, plain(other))),
         records=[(r.kind, r.cause) for r in api.fallbacks()])
"""


@pytest.fixture
def artifact(tmp_path):
    write_models(tmp_path)
    path = tmp_path / "plain.aot"
    r = run(SAVE, tmp_path, env={"ARTIFACT": str(path)})
    assert r.get("saved") and path.exists(), r
    return path


def test_guard_mismatch_load_fails_without_fix(tmp_path, artifact):
    r = run(LOAD_OTHER_SHAPE, tmp_path, disable=True, env={"ARTIFACT": str(artifact)})
    assert r["ok_same"] is True
    assert r["raised"] == "RuntimeError" and r["msg"].startswith("GuardManager check failed"), r


def test_guard_mismatch_load_passes_with_fix(tmp_path, artifact):
    r = run(LOAD_OTHER_SHAPE, tmp_path, env={"ARTIFACT": str(artifact)})
    assert r["ok_same"] is True
    assert r["raised"] is None and r["match"] is True, r
    assert [k for k, _ in r["records"]] == ["guard-miss"]
    assert "size mismatch" in r["records"][0][1] or "GuardManager" in r["records"][0][1]


def test_guard_mismatch_load_strict_propagates(tmp_path, artifact):
    r = run(LOAD_OTHER_SHAPE, tmp_path, env={"ARTIFACT": str(artifact), "TORCHFIX_AOT_FALLBACK_STRICT": "1"})
    assert r["raised"] == "RuntimeError" and r["msg"].startswith("GuardManager check failed"), r


MEMO = """
import time
from aotfb_models import graph_break
import torch._dynamo.aot_compile as aot
from torchfix_aot_fallback import api
calls = []
inner = aot.aot_compile_fullgraph.__wrapped__ if hasattr(aot.aot_compile_fullgraph, "__wrapped__") else None
import torch._dynamo.convert_frame as cf
real_capture = cf.fullgraph_capture
def counting_capture(*a, **k):
    calls.append(1)
    return real_capture(*a, **k)
cf.fullgraph_capture = counting_capture  # counts real AOT capture attempts (test instrumentation)
x = torch.randn(16)
t = time.perf_counter()
fn = torch.compile(graph_break, fullgraph=True, backend=BACKEND).aot_compile(((x,), {}))
out = fn(x)
emit(kinds=[r.kind for r in api.fallbacks()], captures=len(calls), match=bool(torch.allclose(out, graph_break(x))),
     memo_files=sorted(os.listdir(api.memo_dir())) if os.path.isdir(api.memo_dir()) else [], seconds=time.perf_counter() - t)
"""


def test_memo_skips_second_attempt_and_is_invalidated_by_source_change(tmp_path):
    write_models(tmp_path)
    first = run(MEMO, tmp_path)
    assert first["kinds"] == ["compile"] and first["captures"] == 1 and first["match"], first
    assert len(first["memo_files"]) == 1
    second = run(MEMO, tmp_path)
    assert second["kinds"] == ["memo"] and second["captures"] == 0 and second["match"], second
    assert second["memo_files"] == first["memo_files"]
    assert sum("skipping the AOT compile" in line for line in second["stderr"].splitlines()) == 1
    write_models(tmp_path, extra="\n# edited\n")  # source change of the model's file
    third = run(MEMO, tmp_path)
    assert third["kinds"] == ["compile"] and third["captures"] == 1, third
    assert len(third["memo_files"]) == 2


def test_memo_opt_out_makes_every_process_retry(tmp_path):
    write_models(tmp_path)
    env = {"TORCHFIX_AOT_FALLBACK_MEMO": "0"}
    for _ in range(2):
        r = run(MEMO, tmp_path, env=env)
        assert r["kinds"] == ["compile"] and r["captures"] == 1 and r["memo_files"] == [], r


def test_memo_is_ignored_in_strict_mode(tmp_path):
    write_models(tmp_path)
    assert run(MEMO, tmp_path)["kinds"] == ["compile"]
    r = run(MEMO, tmp_path, env={"TORCHFIX_AOT_FALLBACK_STRICT": "1"})
    assert "Unsupported" in r["stderr"] and r["rc"] != 0


HELPER = """
from aotfb_models import plain, graph_break
from torchfix_aot_fallback import api
x = torch.randn(16)
d = os.environ["ARTIFACT_DIR"]
a = api.load_or_compile(plain, ((x,), {}), os.path.join(d, "plain.aot"), backend=BACKEND)
b = api.load_or_compile(graph_break, ((x,), {}), os.path.join(d, "gb.aot"), backend=BACKEND)
y = torch.randn(5)
emit(a=type(a).__name__, b=type(b).__name__, a_ok=bool(torch.allclose(a(x), plain(x))), b_ok=bool(torch.allclose(b(x), graph_break(x))),
     a_other=bool(torch.allclose(a(y), plain(y))), files=sorted(f for f in os.listdir(d) if not f.startswith(".")),
     kinds=[r.kind for r in api.fallbacks()])
"""


@pytest.mark.parametrize("disable", [True, False], ids=["fix_disabled", "fix_applied"])
def test_load_or_compile_builds_once_then_loads(tmp_path, disable):
    """The helper applies the policy itself, so it works whether or not the patch is active."""
    write_models(tmp_path)
    env = {"ARTIFACT_DIR": str(tmp_path / "artifacts")}
    (tmp_path / "artifacts").mkdir()
    first = run(HELPER, tmp_path, env=env, disable=disable)
    assert first["a"] == "LoadedArtifact" and first["b"] == "JITFallback", first
    assert first["a_ok"] and first["b_ok"] and first["a_other"]
    assert first["files"] == ["plain.aot"]
    assert first["kinds"] == ["compile", "guard-miss"]
    second = run(HELPER, tmp_path, env=env, disable=disable)
    assert second["a"] == "LoadedArtifact" and second["b"] == "JITFallback", second
    assert second["kinds"] == ["memo", "guard-miss"]
    assert second["a_ok"] and second["b_ok"] and second["a_other"]
