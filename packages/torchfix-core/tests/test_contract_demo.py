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
