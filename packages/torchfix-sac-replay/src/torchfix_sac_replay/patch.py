"""Implementation of the sac-replay fix: probe and patch ``_CheckpointFrame.__init__``.

Patch point (stable across torch 2.11-2.15, unlike the generator that builds the frame:
``_checkpoint_without_reentrant_generator`` in 2.11-2.13, ``..._generator_impl`` in 2.14/2.15):
``torch/utils/checkpoint.py::_CheckpointFrame.__init__(self, recompute_fn, early_stop,
unpack_error_cb, metadata_fn)``; every non-reentrant checkpoint (``checkpoint(use_reentrant=False)``,
``checkpoint_wrapper``, the composable ``checkpoint``) builds one frame per call, and the unpack hook
calls ``frame.recompute_fn`` at recompute time. See :mod:`torchfix_sac_replay.carry`.

Upstream: pytorch#186537 (open), PR #173568 (per-thread config), PR #186583 (closed), PR #191777
(opt-in ``AutogradContextVar``, open), prime-rl #3951 (copies three named settings, SAC callers only).
"""

from __future__ import annotations

from torchfix_core import Fix, ProbeResult
from torchfix_core.probes import require_parameters

from torchfix_sac_replay import carry, probes


class SacReplayFix(Fix):
    """Carry the forward's contextvars into non-reentrant checkpoint recompute; explain SAC replay errors."""

    def probe(self) -> ProbeResult:
        import torch.utils.checkpoint as ckpt

        where = "torch.utils.checkpoint._CheckpointFrame.__init__"
        require_parameters(
            getattr(ckpt, "_CheckpointFrame", None), "__init__", probes.FRAME_INIT_SIGNATURE, where=where
        )
        if not probes.dynamo_config_is_context_local():
            return ProbeResult(
                False,
                "torch._dynamo.config overrides are process-global here (pre-2.12): the recompute thread "
                "already sees the forward's config",
            )
        return ProbeResult(
            True,
            "compiler config overrides are per-context (ContextVar); the recompute on another thread would read "
            "defaults",
        )

    def apply(self) -> None:
        import torch.utils.checkpoint as ckpt

        self.patches.wrap(
            ckpt._CheckpointFrame, "__init__", carry.make_frame_init, signature=probes.FRAME_INIT_SIGNATURE
        )
