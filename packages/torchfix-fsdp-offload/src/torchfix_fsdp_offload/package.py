"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

FIX = FixSpec(
    id="fsdp-offload-hook",
    summary=(
        "FSDP2 CPUOffloadPolicy(pin_memory=True): a parameter with post-accumulate-grad hooks gets a blocking "
        "gradient copy to the CPU, so the hook (optimizer in backward) reads the finished gradient."
    ),
    implementation="torchfix_fsdp_offload.patch:OffloadHookFix",
    distribution="torchfix-fsdp-offload",
    # validated: the race red without / green with the fix on a GPU with 2.11.0; the CPU tests (probe,
    # the flag around foreach_reduce) on 2.8.0, 2.11.0, 2.12.0; 2.9.1, 2.10.0, 2.12.1 by the source and the
    # probe. 2.13.0 carries upstream's guard (forced, the probe says not-needed)
    targets={"torch": ">=2.8,<2.13"},
    # the module whose global ``foreach_reduce`` FSDPParamGroup.post_backward calls: imported by
    # torch.distributed.fsdp (not by `import torch`), before any fully_shard call
    triggers=("torch.distributed.fsdp._fully_shard._fsdp_param_group",),
    order=42,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=("https://github.com/pytorch/pytorch/pull/180666",),
    # silent (no exception): the symptom seen on the GPU run with 2.11.0 (hooks read other bytes than
    # the final gradient)
    signatures=(
        Signature(
            symptom=(
                "silent: with FSDP2 fully_shard and CPUOffloadPolicy(pin_memory=True), a post-accumulate-grad "
                "hook (optimizer in backward) reads param.grad before its non-blocking copy to pinned CPU memory "
                "has landed: stale or partial gradients, wrong optimizer updates, no error"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_fsdp_offload.reproduction:offload_hook",
        measure=(
            "how many post-accumulate-grad hooks read CPU gradient bytes differing from the final gradient, "
            "per step, and the largest difference"
        ),
        needs_cuda=True,
        # one run with its interpreter: 9-14 s measured on an H100 with 2.11.0, without and with the fix
        # (NCCL start included); not measured on another release or GPU
        seconds=15,
    ),
)
