"""Data only: what torchfix-core reads at discovery (imports nothing from torch)."""

from torchfix_core.spec import FixSpec

FIX = FixSpec(
    id="sac-replay",
    summary=(
        "Run non-reentrant checkpoint recompute in the forward's contextvars context, so the "
        "recompute sees the forward's Dynamo/Inductor config on any thread; explain SAC replay mismatches."
    ),
    implementation="torchfix_sac_replay.patch:SacReplayFix",
    distribution="torchfix-sac-replay",
    # 2.11 is inside the range on purpose: there the probe decides "not-needed" (process-global config).
    targets={"torch": ">=2.11,<2.16"},
    # torch._dynamo, not torch.utils.checkpoint: the probe reads torch._dynamo.config, and activation at
    # `import torch` must not import Dynamo (~1 s). The bug needs compiled code, which needs Dynamo, and
    # on 2.12-2.15 the non-reentrant checkpoint generator itself imports torch._dynamo before it builds
    # the frame, so the patch is in place before the first frame exists. See docs/fixes/sac-replay.md.
    triggers=("torch._dynamo",),
    order=20,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/186537",
        "https://github.com/pytorch/pytorch/pull/173568",
        "https://github.com/pytorch/pytorch/pull/186583",
        "https://github.com/pytorch/pytorch/pull/191777",
        "https://github.com/PrimeIntellect-ai/prime-rl/pull/3951",
    ),
)
