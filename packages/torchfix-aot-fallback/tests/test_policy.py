"""The policy on real torch exception objects (in-process, fast): what falls back, what propagates."""

from __future__ import annotations

import threading

import pytest
import torch
import torch._dynamo.exc as dexc
from torchfix_aot_fallback import memo, policy


def _unsupported(msg: str = "Call to `torch._dynamo.graph_break()`") -> dexc.Unsupported:
    return dexc.Unsupported(msg)


def _jit_wrapped(exc: BaseException) -> BaseException:
    def backend(gm, example_inputs):
        raise exc

    torch._dynamo.reset()
    try:
        torch.compile(lambda x: x.sin() + 1, backend=backend)(torch.randn(3))
    except Exception as caught:  # noqa: BLE001 - the exception is the result
        return caught
    raise AssertionError("backend did not raise")


def test_unsupported_falls_back():
    assert policy.classify(_unsupported()).fallback is True
    assert policy.classify(_unsupported("Attempted to read undefined local variable")).fallback is True


def test_non_serializable_backend_falls_back():
    exc = RuntimeError(
        "Compiled function type <class 'function'> (produced from backend f) does not implement SerializableCallable."
    )
    assert policy.classify(exc).fallback is True


def test_bare_runtime_error_and_misuse_propagate():
    assert policy.classify(RuntimeError("Graph breaks are not supported with aot compile.")).fallback is False
    assert policy.classify(RuntimeError("something else")).fallback is False


@pytest.mark.parametrize(
    "fatal",
    [AssertionError("boom"), torch.OutOfMemoryError("CUDA out of memory"), RuntimeError("CUDA error: out of memory")],
    ids=["assert", "oom", "oom-as-plain-runtimeerror"],
)
def test_fatal_errors_propagate_bare_wrapped_and_chained(fatal):
    assert policy.classify(fatal).fallback is False
    wrapped = _jit_wrapped(fatal)  # what the JIT path really raises
    assert isinstance(wrapped, dexc.BackendCompilerFailed) and wrapped.inner_exception is fatal
    assert policy.classify(wrapped).fallback is False
    chained = _unsupported()
    chained.__cause__ = wrapped
    assert policy.classify(chained).fallback is False
    context = _unsupported()
    context.__context__ = fatal
    assert policy.classify(context).fallback is False


def test_user_exception_observed_during_tracing_propagates():
    exc = _unsupported("Observed exception")
    exc.__cause__ = dexc.ObservedException("user ValueError")
    assert policy.classify(exc).fallback is False


def test_keyboard_interrupt_never_falls_back():
    exc = _unsupported()
    exc.__context__ = KeyboardInterrupt()
    assert policy.classify(exc).fallback is False
    assert policy.classify(KeyboardInterrupt()).fallback is False


def test_required_cache_hit_failure_never_falls_back():
    from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache, FXGraphCacheMiss

    assert policy.classify(FXGraphCacheMiss()).fallback is False
    assert policy.classify(BypassAOTAutogradCache("cannot cache this graph")).fallback is True


def test_guard_miss_detection():
    assert policy.is_guard_miss(RuntimeError("GuardManager check failed, reason: x"))
    assert not policy.is_guard_miss(RuntimeError("other"))


def test_strict_switches(monkeypatch):
    monkeypatch.delenv("TORCHFIX_AOT_FALLBACK_STRICT", raising=False)
    assert policy.is_strict() is False
    monkeypatch.setenv("TORCHFIX_AOT_FALLBACK_STRICT", "1")
    assert policy.is_strict() is True
    with policy.strict(False):
        assert policy.is_strict() is False
    monkeypatch.delenv("TORCHFIX_AOT_FALLBACK_STRICT")
    policy.set_strict(True)
    try:
        assert policy.is_strict() is True
    finally:
        policy.set_strict(None)
    if hasattr(torch._dynamo.config, "strict_precompile"):  # absent on torch 2.8 (no AOT precompile)
        monkeypatch.setattr(torch._dynamo.config, "strict_precompile", True)
        assert policy.is_strict() is True


def _f(x):
    return x + 1


def test_memo_key_depends_on_inputs_backend_and_torch(monkeypatch):
    base = memo.key(_f, ((torch.randn(4),), {}), "inductor", None)
    assert base == memo.key(_f, ((torch.randn(4),), {}), "inductor", None)
    assert base != memo.key(_f, ((torch.randn(5),), {}), "inductor", None)
    assert base != memo.key(_f, ((torch.randn(4, dtype=torch.float64),), {}), "inductor", None)
    assert base != memo.key(_f, ((torch.randn(4),), {}), "aot_eager", None)
    assert base != memo.key(_f, ((torch.randn(4),), {}), "inductor", True)
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert base != memo.key(_f, ((torch.randn(4),), {}), "inductor", None)


def test_memo_writes_are_atomic_and_concurrent_safe(tmp_path):
    memo.set_memo_dir(str(tmp_path))
    try:
        k = memo.key(_f, ((torch.randn(4),), {}), "inductor", None)
        threads = [threading.Thread(target=memo.record, args=(k, f"cause {i}", "f")) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        entry = memo.lookup(k)
        assert entry is not None and entry["cause"].startswith("cause ")
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{k}.json"]  # no temp files left
        (tmp_path / f"{k}.json").write_text("{torn")
        assert memo.lookup(k) is None  # corrupt entry counts as absent
        assert memo.clear_memo() == 1
    finally:
        memo.set_memo_dir(None)


def test_memo_dir_respects_inductor_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert memo.memo_dir() == str(tmp_path / "torchfix" / "aot-fallback")
