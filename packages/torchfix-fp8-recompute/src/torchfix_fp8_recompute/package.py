"""Data only: what torchfix-core reads at discovery (imports neither torch nor TransformerEngine)."""

from torchfix_core.spec import FixSpec

FIX = FixSpec(
    id="fp8-recompute",
    summary=(
        "TransformerEngine checkpoint: keep FP8 delayed-scaling recompute state when FP8 autocast "
        "is opened inside the checkpointed callable (TE PR #3284 backport)."
    ),
    implementation="torchfix_fp8_recompute.patch:Fp8RecomputeFix",
    distribution="torchfix-fp8-recompute",
    # Validated on the real TE Python sources of these releases (CPU, stand-in extension); 2.19+
    # carry the upstream fix and the probe reports not-needed there.
    targets={"transformer_engine": ">=1.13,<2.21"},
    triggers=("transformer_engine.pytorch.distributed",),
    order=50,
    upstream=("https://github.com/NVIDIA/TransformerEngine/pull/3284",),
)

PAIRING = FixSpec(
    id="fp8-recompute-pairing",
    summary=(
        "TransformerEngine checkpoint: pair FP8 delayed-scaling recompute stashes per module (eval() "
        "modules stash too; checkpoints no backward can reach stash nothing) (TE PR #3394 backport)."
    ),
    implementation="torchfix_fp8_recompute.pairing:Fp8RecomputePairingFix",
    distribution="torchfix-fp8-recompute",
    # Validated on the real TE Python sources of these releases (CPU, stand-in extension; TE 2.19.0
    # also on an H200 with torch 2.11); 2.20.2 carries the upstream fix and the probe reports
    # not-needed there. TE <= 2.17 has other stash code (not validated).
    targets={"torch": ">=2.11,<2.14", "transformer_engine": ">=2.18,<2.21"},
    triggers=("transformer_engine.pytorch.distributed", "transformer_engine.pytorch.module.base"),
    # Disjoint patch points from fp8-recompute (TE PR #3284, which it builds on): no ordering needed.
    order=51,
    upstream=("https://github.com/NVIDIA/TransformerEngine/pull/3394",),
)
