"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec).

Both fixes patch ``FSDPState._pre_forward`` at different layers (``fsdp-recompute-cast`` the function
the Dynamo-disable decorator calls, ``fsdp-recompute-unshard`` that function's code), so they apply
and revert independently, in any order; neither names the other in ``after``.
"""

from torchfix_core.spec import Effect, FixSpec, Signature

#: the traceback frames of a non-reentrant checkpoint's recompute (torch.utils.checkpoint and the
#: composable checkpoint alike, 2.8-2.15): the unpack hook runs the frame's recompute_fn
RECOMPUTE_FRAMES = r'checkpoint\.py", line \d+, in unpack_hook[\s\S]*checkpoint\.py", line \d+, in recompute_fn'

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
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/159359",
        "https://github.com/pytorch/pytorch/pull/182580",
    ),
    # seen in the red runs of tests/_scenarios.py ``cast`` on 2.9.1, 2.10.0, 2.12.0 (fp32 input, bf16
    # param_dtype): the input is Float, the weight BFloat16; the message alone is an ordinary
    # dtype mismatch, hence ``when`` and the context: raised inside a checkpoint's recompute (the
    # forward ran the same code without error)
    signatures=(
        Signature(
            exception="RuntimeError",
            message=r"mat1 and mat2 must have the same dtype, but got Float and BFloat16",
            context=RECOMPUTE_FRAMES,
            when=(
                "the failing matmul is in the backward's activation-checkpoint recompute of an FSDP2 "
                "(fully_shard) module with MixedPrecisionPolicy(param_dtype=bfloat16) whose call is wrapped "
                "in a non-reentrant checkpoint (e.g. Hugging Face gradient_checkpointing_enable), with fp32 inputs"
            ),
        ),
    ),
)

WHEN_UNSHARD = (
    "raised in the backward's activation-checkpoint recompute of a module with a fully_shard-ed child "
    "(FSDP2), after two or more forwards through it before one backward (DPO, contrastive losses)"
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
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/153354",
        "https://github.com/pytorch/pytorch/issues/187437",
        "https://github.com/pytorch/pytorch/pull/171779",
    ),
    # seen in the red runs of tests/_scenarios.py ``unshard`` on 2.9.1 (Python DTensor dispatch: "op: got
    # mixed") and 2.10.0 (C++ dispatch: "op got mixed"); the op is the child module's (addmm for a
    # Linear with bias)
    signatures=(
        Signature(
            exception="RuntimeError",
            message=(
                r"aten\.\w+\.\w+: got mixed torch\.Tensor and DTensor, need to convert all torch\.Tensor "
                r"to DTensor before calling distributed operators"
            ),
            releases="torch >=2.8,<2.10",
            when=WHEN_UNSHARD,
            context=RECOMPUTE_FRAMES,
        ),
        Signature(
            exception="RuntimeError",
            message=(
                r"aten\.\w+\.\w+ got mixed torch\.Tensor and DTensor, need to convert all torch\.Tensor "
                r"to DTensor before calling distributed operators"
            ),
            releases="torch >=2.10,<2.11",
            when=WHEN_UNSHARD,
            context=RECOMPUTE_FRAMES,
        ),
    ),
)
