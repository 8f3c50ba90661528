"""Feature probes on the live torch objects (no version strings).

All of them are side-effect free: :func:`dynamo_config_is_context_local` patches a config value
through ``config.patch`` and the patch restores it.
"""

from __future__ import annotations

import contextvars
from typing import Any

#: The parameters of ``torch.utils.checkpoint._CheckpointFrame.__init__`` the fix was written for
#: (identical in torch 2.10, 2.11, 2.12, 2.13, 2.14.1 and 2.15.0).
FRAME_INIT_SIGNATURE = ("self", "recompute_fn", "early_stop", "unpack_error_cb", "metadata_fn")


def dynamo_config_is_context_local() -> bool:
    """True when a ``torch._dynamo.config`` override made here is invisible in a fresh context.

    That is the case since torch 2.12 (PR #173568: user overrides are ContextVars, "thread-local"),
    so a thread that did not inherit our context (the CUDA autograd worker) reads the defaults. On
    2.11 and older the override is a process-global attribute and the fresh context sees it.
    Requires ``torch._dynamo`` (the fix triggers on it, so it is already imported).
    """
    import torch._dynamo

    cfg: Any = torch._dynamo.config
    sentinel = int(cfg.recompile_limit) + 12345
    with cfg.patch(recompile_limit=sentinel):
        seen = contextvars.Context().run(lambda: cfg.recompile_limit)
    return bool(seen != sentinel)
