"""The contract kit proven on the two test-tree fixes (real distributions, real torch)."""

from torchfix_core.testing import FixContract


class TestDemoCheckpointContract(FixContract):
    """A fix whose trigger (torch.utils.checkpoint) is already imported by import torch."""

    fix_id = "demo-checkpoint"
    patched = [("torch.utils.checkpoint", "detach_variable")]


class TestDemoDynamoContract(FixContract):
    """A fix that waits for torch._dynamo and patches a function and a class attribute."""

    fix_id = "demo-dynamo"
    patched = [("torch._dynamo", "reset"), ("torch._dynamo.eval_frame", "OptimizedModule.__init__")]


def test_state_to_expect_follows_the_validated_range_then_the_test_s_own_evidence(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Inside demo-dynamo's range (torch >=2.5,<2.99) the test's evidence decides; outside it the
    range check answers first, whatever the evidence says."""
    import torch
    from torchfix_core.testing import state_to_expect

    assert state_to_expect("demo-dynamo", True) == "applied"
    assert state_to_expect("demo-dynamo", False) == "not-needed"
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    assert state_to_expect("demo-dynamo", True) == "out-of-range"
    assert state_to_expect("demo-dynamo", False) == "out-of-range"
