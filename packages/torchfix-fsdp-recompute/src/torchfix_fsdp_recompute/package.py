"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec).

Both fixes patch ``FSDPState._pre_forward`` at different layers (``fsdp-recompute-cast`` the function
the Dynamo-disable decorator calls, ``fsdp-recompute-unshard`` that function's code), so they apply
and revert independently, in any order; neither names the other in ``after``.
"""

from torchfix_core.spec import FixSpec

CAST_FIX = FixSpec(
    id="fsdp-recompute-cast",
    summary=(
        "An FSDP2 module recomputed by activation checkpointing gets its MixedPrecisionPolicy casts "
        "(param_dtype on inputs, output_dtype on outputs), as in its forward."
    ),
    implementation="torchfix_fsdp_recompute.patch:RecomputeCastFix",
    distribution="torchfix-fsdp-recompute",
    # validated on 2.8.0, 2.9.1, 2.10.0, 2.11.0, 2.12.0, 2.12.1 (bug) and 2.13.0 (fixed upstream: not-needed)
    targets={"torch": ">=2.8,<2.14"},
    # the module defining FSDPState: imported by torch.distributed.fsdp (not by `import torch`),
    # always before any fully_shard call can register its hooks
    triggers=("torch.distributed.fsdp._fully_shard._fsdp_state",),
    order=40,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/159359",
        "https://github.com/pytorch/pytorch/pull/182580",
    ),
)

UNSHARD_FIX = FixSpec(
    id="fsdp-recompute-unshard",
    summary=(
        "An FSDP2 module recomputed by activation checkpointing unshards parameters that an earlier "
        "backward resharded (nested fully_shard, two forwards before one backward)."
    ),
    implementation="torchfix_fsdp_recompute.patch:RecomputeUnshardFix",
    distribution="torchfix-fsdp-recompute",
    # validated on 2.8.0, 2.9.1, 2.10.0 (bug) and 2.11.0-2.13.0 (fixed upstream: not-needed)
    targets={"torch": ">=2.8,<2.14"},
    triggers=("torch.distributed.fsdp._fully_shard._fsdp_state",),
    order=41,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/153354",
        "https://github.com/pytorch/pytorch/issues/187437",
        "https://github.com/pytorch/pytorch/pull/171779",
    ),
)
