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
