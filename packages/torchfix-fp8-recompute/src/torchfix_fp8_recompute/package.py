"""Data only: what torchfix-core reads at discovery (imports neither torch nor TransformerEngine)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

#: TE's recompute-stash lookup of a module that stashed nothing (``quantization.py`` TE 2.x,
#: ``fp8.py`` TE 1.x): both fixes' red runs raise it, each under its own condition
_NO_STASH = r"'global_fp8_buffer_pos_fwd_recompute'"

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
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=("https://github.com/NVIDIA/TransformerEngine/pull/3284",),
    # From the red runs of tests/test_signatures.py (TE 1.13.0 and 2.18.0: same wording).
    signatures=(
        Signature(
            exception="KeyError",
            message=_NO_STASH,
            releases="transformer_engine >=1.13,<2.19",
            when="the te.checkpoint'ed callable opens its own te.autocast / fp8_autocast with delayed "
            "scaling (FP8 off when the checkpoint is entered); the error comes in the recompute",
        ),
        Signature(
            symptom="an FP8 recompute inside te.checkpoint pops a scale/amax stash an earlier step left, "
            "when the callable opens its own FP8 autocast (stale scale, no error)",
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_fp8_recompute.reproduction:fp8_recompute",
        measure="the recompute's stash KeyError, or the recomputes' FP8 scales against their forwards'",
        # TE's Python bookkeeping, not a CUDA kernel: on a CUDA GPU, or on the CPU where TE's extension
        # is the test tree's stand-in (it answers TE's CUDA queries); elsewhere it says it cannot run
        libraries={"transformer_engine": ">=1.13,<2.21"},
        # one run with its interpreter: 5-6 s in the child, 12 s for verify's pair, on the CPU with TE
        # 2.18.0's stand-ins (2-core machine; TE's import most of it)
        seconds=20,
    ),
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
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=("https://github.com/NVIDIA/TransformerEngine/pull/3394",),
    # From the red runs of tests/test_signatures.py (TE 2.18.0 and 2.19.0: same wording).
    signatures=(
        Signature(
            exception="KeyError",
            message=_NO_STASH,
            releases="transformer_engine >=2.18,<2.20",
            when="a TE module in eval() runs under te.checkpoint with FP8 delayed scaling (it skipped its "
            "stash in the forward; the error comes in the recompute)",
        ),
        Signature(
            exception="IndexError",
            message=r"^pop from an empty deque",
            context=r"(?m), in get_old_fp8_meta_tensors_for_recompute$",
            releases="transformer_engine >=2.18,<2.20",
            when="a TE module put in eval() after a training step runs under te.checkpoint with FP8 "
            "delayed scaling (its stash deque is empty in the recompute)",
        ),
        Signature(
            symptom="te.checkpoint under torch.no_grad() (or reentrant with no input requiring grad) leaves "
            "one FP8 scale/amax stash per module that nothing consumes: they pile up, and the next "
            "recompute pops the oldest (another forward's scale, no error)",
        ),
        Signature(
            symptom="te.checkpoint under torch.no_grad() with a context_fn that enables grad returns an output "
            "that does not require grad; the backward then fails with torch's ordinary 'element 0 of tensors "
            "does not require grad' (no TE frame in its traceback: not matched, see the report's count)",
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_fp8_recompute.reproduction:fp8_recompute_pairing",
        measure="the recompute's stash error, or the eval() module's stash left unbalanced",
        # TE's Python bookkeeping (see fp8-recompute's); its autocast is opened around the checkpoint, so
        # fp8-recompute (which a callable opening its own autocast needs on TE 2.18) plays no part
        libraries={"transformer_engine": ">=2.18,<2.21"},
        seconds=20,
    ),
)
