"""The "not found in storage" replay error explains what differed, keeps its type, chains the original."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
import torchfix_core
from conftest import scenario
from torch.utils.checkpoint import checkpoint
from torchfix_sac_replay import explain

# Measured: SAC records a compiled forward's extern kernels (aten.mm.out) from torch 2.13; on 2.12 its
# modes skip compiled code (ignore_compile_internals) and the forward records nothing.
RECORDS_COMPILED_OPS = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)


#: torch 2.8/2.9: Dynamo skips compiled code under SAC's modes (they do not declare
#: ignore_compile_internals()), so the forward runs eagerly too and nothing mismatches
COMPILED_UNDER_SAC = all(
    getattr(mode, "ignore_compile_internals", lambda: False)() is True
    for mode in torch.utils.checkpoint.create_selective_checkpoint_contexts([torch.ops.aten.mm.default])
)


@pytest.mark.skipif(not COMPILED_UNDER_SAC, reason="compiled code runs eagerly under SAC here (torch 2.8/2.9)")
def test_eager_replay_mismatch_error_is_plain_without_fix() -> None:
    """BRIEF section 1.1 without torchfix: torch's bare message, nothing chained."""
    result = scenario("eager_replay", fix=False)
    assert not result["ok"]
    assert result["error_type"] == "builtins.RuntimeError"
    assert "aten.mm.default encountered during backward" in result["error"]
    assert "[torchfix sac-replay]" not in result["error"]
    assert result["cause"] is None


def test_eager_replay_mismatch_error_is_explained_with_fix(bug_present: bool) -> None:
    """A genuine compiled-forward/eager-replay mismatch: same type, original chained, cause named."""
    if not bug_present:
        pytest.skip("the explanation is part of the fix, which is not applied on this torch")
    result = scenario("eager_replay", fix=True)
    assert result["fix"] == "applied"
    assert not result["ok"], "an eager replay of a compiled forward must still fail (never swallowed)"
    assert result["error_type"] == "builtins.RuntimeError"
    assert result["cause_type"] == "builtins.RuntimeError"
    original = result["cause"]
    assert "aten.mm.default encountered during backward" in original and "[torchfix" not in original
    message = result["error"]
    assert message.startswith(original)
    assert "[torchfix sac-replay]" in message
    assert "compiled forward replayed eagerly" in message
    if RECORDS_COMPILED_OPS:
        assert "aten.mm.out" in message  # what the compiled forward recorded
    else:
        assert "compiled forward replayed eagerly (likely)" in message and "Forward recorded: nothing." in message
    assert "reproduction_sac_replay.py" in message and "in f" in message  # where the eager op came from
    assert "checkpoint_wrapper" in message  # the remedy
    assert "recompile limit hit" not in message and "autotuning during recompute" not in message


@pytest.fixture
def fix_applied(bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("fix not applied on this torch")
    torchfix_core.apply(only=["sac-replay"])
    assert next(r.state for r in torchfix_core.status() if r.id == "sac-replay") == "applied"


def _recompute_raises(exc: BaseException) -> BaseException:
    calls = {"n": 0}

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 2:
            raise exc
        return x.sin().cos()

    x = torch.randn(4, requires_grad=True)
    out = checkpoint(fn, x, use_reentrant=False)
    with pytest.raises(BaseException) as info:
        out.sum().backward()
    return info.value


def test_unrelated_recompute_errors_pass_through_unchanged(fix_applied: None) -> None:
    original = RuntimeError("boom in recompute")
    raised = _recompute_raises(original)
    assert raised is original
    assert raised.__cause__ is None


def test_storage_error_with_exotic_type_is_reraised_unchanged(fix_applied: None) -> None:
    """Never swallowed: an exception type that cannot be rebuilt from a message goes on as it is."""

    class TwoArgError(RuntimeError):
        def __init__(self, a: str, b: str) -> None:
            super().__init__(f"{a} {b}")

    original = TwoArgError("aten.foo encountered during backward", "but not found in storage")
    raised = _recompute_raises(original)
    assert raised is original


def test_config_differences_name_the_per_thread_values(bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("config overrides are not ContextVars on this torch")
    import contextvars

    seen: dict[str, Any] = {}
    with torch._dynamo.config.patch(recompile_limit=77, capture_scalar_outputs=True):
        forward = contextvars.copy_context()
    t = threading.Thread(target=lambda: seen.update(ctx=contextvars.copy_context()))
    t.start()
    t.join()
    diffs = explain.config_differences(forward, seen["ctx"])
    assert "torch._dynamo.config.recompile_limit: forward 77, recompute thread 8" in diffs
    assert "torch._dynamo.config.capture_scalar_outputs: forward True, recompute thread False" in diffs
