"""torchfix-core's contract (import orders, idempotency, revert, env switches) for sac-replay."""

from __future__ import annotations

import contextvars

import torch._dynamo
from torchfix_core.testing import FixContract


def _expected_state() -> str:
    cfg = torch._dynamo.config
    sentinel = cfg.recompile_limit + 12345
    with cfg.patch(recompile_limit=sentinel):
        seen = contextvars.Context().run(lambda: cfg.recompile_limit)
    return "applied" if seen != sentinel else "not-needed"


class TestContract(FixContract):
    fix_id = "sac-replay"
    patched = [("torch.utils.checkpoint", "_CheckpointFrame.__init__")]
    expected_state = _expected_state()
