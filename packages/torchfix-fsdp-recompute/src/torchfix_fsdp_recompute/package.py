"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec).

Both fixes patch ``FSDPState._pre_forward`` at different layers (``fsdp-recompute-cast`` the function
the Dynamo-disable decorator calls, ``fsdp-recompute-unshard`` that function's code), so they apply
and revert independently, in any order; neither names the other in ``after``.
"""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

#: the traceback frames of a non-reentrant checkpoint's recompute (torch.utils.checkpoint and the
#: composable checkpoint alike, 2.8-2.15): the unpack hook runs the frame's recompute_fn
RECOMPUTE_FRAMES = r'checkpoint\.py", line \d+, in unpack_hook[\s\S]*checkpoint\.py", line \d+, in recompute_fn'

#: ... and under the recompute, a module called through ``nn.Module``'s hooked path (``_call_impl`` runs
#: ``inner`` only for a module with forward hooks: FSDP2's pre/post-forward hooks are). FSDP's own
#: frames have returned before the op fails, so they are never in the traceback; a dtype mismatch
#: in the recompute of a hook-free module or function is not this bug and is not claimed
RECOMPUTE_OF_HOOKED_MODULE = RECOMPUTE_FRAMES + r'[\s\S]*module\.py", line \d+, in inner\n'

#: where the uncast float32 activation meets the bfloat16 parameters first, as the real red runs
#: printed it (tests/corpus/fsdp-recompute-cast/): a 2-D matmul (nn.Linear on 2-D input), F.linear
#: on 3-D activations (CPU's wording, and CUDA's as libtorch_cuda spells it), SDPA's input check
#: (q and k float32 after rotary embeddings with float32 cos/sin, v bfloat16)
MIXED_DTYPE_MESSAGES = (
    r"mat1 and mat2 must have the same dtype, but got Float and BFloat16",
    r"expected (?:m1 and m2|mat1 and mat2) to have the same dtype, but got: float != c10::BFloat16",
    r"Expected query, key, and value to have the same dtype, but got query\.dtype: (?:float|c10::BFloat16) "
    r"key\.dtype: (?:float|c10::BFloat16) and value\.dtype: (?:float|c10::BFloat16) instead",
)

#: the same three as one alternation, for Dynamo's wrapper of whichever it caught (written out: the
#: package module holds declarations only, no computed values; test_signatures.py checks it is the
#: alternation of MIXED_DTYPE_MESSAGES)
MIXED_DTYPE_ANY = (
    r"(?:mat1 and mat2 must have the same dtype, but got Float and BFloat16"
    r"|expected (?:m1 and m2|mat1 and mat2) to have the same dtype, but got: float != c10::BFloat16"
    r"|Expected query, key, and value to have the same dtype, but got query\.dtype: (?:float|c10::BFloat16) "
    r"key\.dtype: (?:float|c10::BFloat16) and value\.dtype: (?:float|c10::BFloat16) instead)"
)

WHEN_CAST = (
    "the failing op is in the backward's activation-checkpoint recompute of an FSDP2 (fully_shard) module "
    "with MixedPrecisionPolicy(param_dtype=bfloat16) whose call is wrapped in a non-reentrant checkpoint "
    "(e.g. Hugging Face gradient_checkpointing_enable, transformers <= 5.22.2), and a float32 tensor reaches "
    "that module (a float32 embedding or root, output_dtype=float32 on the unit before it, fp32 rotary cos/sin)"
)

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
    # seen in the red runs of ``reproduction.py``'s ``cast`` (2-D matmul) on 2.9.1, 2.10.0, 2.12.0, and of
    # tests/clients/hf_job.py (transformers 4.57.6 and 5.22.2: Llama and Qwen3 with SDPA and eager
    # attention; the layers compiled before fully_shard: Dynamo's TorchRuntimeError around the same
    # message) on 2.8.0, 2.10.0, 2.12.0. Each message alone is an ordinary dtype mismatch, hence the
    # context: raised inside a checkpoint's recompute of a module with forward hooks (the forward ran
    # the same code without error); the same messages from a forward or a plain recompute stay unclaimed
    signatures=(
        *(
            Signature(exception="RuntimeError", message=message, context=RECOMPUTE_OF_HOOKED_MODULE, when=WHEN_CAST)
            for message in MIXED_DTYPE_MESSAGES
        ),
        Signature(
            exception="TorchRuntimeError",
            message=r"Dynamo failed to run FX node with fake tensors: [\s\S]*got RuntimeError\('" + MIXED_DTYPE_ANY,
            context=RECOMPUTE_OF_HOOKED_MODULE,
            when=WHEN_CAST + "; the module is torch.compile'd (Dynamo traces the recompute with fake tensors)",
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_fsdp_recompute.reproduction:cast",
        measure="the dtype error in the recompute, or 3 steps' gradients against training without checkpointing",
        seconds=20,
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
    # seen in the red runs of ``reproduction.py``'s ``unshard`` on 2.9.1 (Python DTensor dispatch: "op: got
    # mixed") and 2.10.0 (C++ dispatch: "op got mixed"); the op is the child module's (addmm for a
    # Linear with bias). The red runs of real clients match the 2.10 one unchanged
    # (tests/corpus/fsdp-recompute-unshard/: transformers 5.22.2's Llama and Qwen3-MoE, each layer's
    # attention a nested unit, two forwards before one backward, torch 2.10.0: mm from the attention's
    # projection; one process, torchrun, error.json); the message from a forward (the root's embedding
    # called outside its unit) stays unclaimed
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
    reproduction=Reproduction(
        run="torchfix_fsdp_recompute.reproduction:unshard",
        measure="DTensor's mixed-tensor error in the recompute, or 3 steps' gradients against training without checkpointing",
        seconds=20,
    ),
)
