"""Data only: what torchfix-core reads at discovery (imports nothing from torch)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

#: When SAC's "not found in storage" means sac-replay's bug (the message alone has other causes).
_RECOMPUTE_OFF_THREAD = (
    "the checkpointed region calls torch.compile'd code, compiler config (e.g. "
    "torch._dynamo.config.recompile_limit) was set on the forward's thread, and the recompute runs on "
    "another thread (a CUDA backward runs it on the autograd engine's device thread), where it reads the "
    "defaults, recompiles or falls back to eager, and replays ops the forward did not record"
)
#: When a recompile-limit failure in the recompute means sac-replay's bug.
_RECOMPILE_LIMIT_IN_RECOMPUTE = (
    "a checkpoint's recompute recompiles a torch.compile'd block (fullgraph=True, or "
    "fail_on_recompile_limit_hit) after a guard miss, the training thread raised "
    "torch._dynamo.config.recompile_limit above the default, and the recompute runs on another thread "
    "(a CUDA backward's device thread, a backward called from a worker thread), which reads the default (8)"
)
#: When sac-storage-key's messages mean its bug.
_REGION_SKIPPED = (
    "selective activation checkpointing saves inductor_compiled_code regions "
    "(torch._inductor.config.wrap_inductor_compiled_regions) and the recompute skips a compiled region "
    "the forward ran (its result was cached, e.g. a block mask kept in a dict)"
)
#: The failure is raised while a non-reentrant checkpoint recomputes (torch.utils.checkpoint's frames).
_IN_RECOMPUTE = r'torch[/\\]utils[/\\]checkpoint\.py", line \d+, in recompute_fn'

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
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/186537",
        "https://github.com/pytorch/pytorch/pull/173568",
        "https://github.com/pytorch/pytorch/pull/186583",
        "https://github.com/pytorch/pytorch/pull/191777",
        "https://github.com/PrimeIntellect-ai/prime-rl/pull/3951",
    ),
    # From the red runs of ``reproduction_sac_replay.py guard_miss`` (CPU, backward on a second thread):
    # torch 2.12.0 (2.11's wording, lenient replay) and 2.13.0 / 2.15.0 (strict replay's wording).
    signatures=(
        Signature(
            exception="RuntimeError",
            message=r"aten\.\S+ encountered during backward, but not found in storage",
            releases="torch >=2.12,<2.13",
            when=_RECOMPUTE_OFF_THREAD,
        ),
        Signature(
            exception="RuntimeError",
            message=r"aten\.\S+ encountered during backward but not found in storage\. This can happen",
            releases="torch >=2.13",
            when=_RECOMPUTE_OFF_THREAD,
        ),
        # From the red run of a real client (tests/clients/test_client_corpus.py: torchtitan 0.3.0's
        # SelectiveAC around per-block fullgraph compiles, prime-rl's ordering, torch 2.13.0): the
        # recompute recompiles under the default recompile_limit (8) and fullgraph=True turns the hit
        # into this error. The same error outside a recompute (a forward's own recompiles) is not claimed.
        Signature(
            exception="FailOnRecompileLimitHit",
            message=r"^Hard failure due to (?:fullgraph=True|fail_on_recompile_limit_hit)",
            releases="torch >=2.12",
            when=_RECOMPILE_LIMIT_IN_RECOMPUTE,
            context=_IN_RECOMPUTE,
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_sac_replay.reproduction:sac_replay",
        measure=(
            "SAC's 'not found in storage' error of a recompute run on a second thread, or the max abs "
            "gradient error against the un-checkpointed eager reference"
        ),
        seconds=25,
    ),
)

STORAGE_KEY_FIX = FixSpec(
    id="sac-storage-key",
    summary=(
        "Give every inductor_compiled_code region its own selective-checkpoint queue (torch 2.13's "
        "_sac_storage_key), so a recompute that skips a cached region no longer pops its outputs."
    ),
    implementation="torchfix_sac_replay.storage_key:SacStorageKeyFix",
    distribution="torchfix-sac-replay",
    # 2.13-2.15 are inside on purpose: there torch has _sac_storage_key and the probe says "not-needed".
    targets={"torch": ">=2.10,<2.16"},
    # torch._dynamo, not torch.utils.checkpoint: `import torch` already imports torch.utils.checkpoint, and
    # the probe's replay check dispatches through the SAC modes, whose torch._disable_dynamo layer (2.11+)
    # imports torch._dynamo on first use. Only compiled code dispatches inductor_compiled_code, and it
    # needs torch._dynamo first, so the patch is in place before any region is saved.
    triggers=("torch._dynamo",),
    order=25,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/175258",
        "https://github.com/pytorch/pytorch/pull/177198",
        "https://github.com/pytorch/pytorch/pull/183080",
    ),
    # From the red runs of ``reproduction_sac_storage_key.py upstream`` (DTensor) on torch 2.10.0, 2.11.0
    # and 2.12.0; the messages are ordinary ones, so each needs the recompute's frames (context).
    signatures=(
        Signature(
            exception="RuntimeError",
            message=r"Only Tensors of floating point and complex dtype can require gradients",
            releases="torch >=2.10,<2.12",
            when=_REGION_SKIPPED,
            context=_IN_RECOMPUTE,
        ),
        Signature(
            exception="IndexError",
            message=r"^tuple index out of range$",
            releases="torch >=2.12,<2.13",
            when=_REGION_SKIPPED,
            context=_IN_RECOMPUTE,
        ),
        Signature(
            symptom=(
                "wrong gradients and no error: the recompute skipped a cached compiled region and the next "
                "region got its saved outputs, which had the same count, shapes and dtypes"
            ),
            releases="torch >=2.10,<2.13",
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_sac_replay.reproduction:sac_storage_key",
        measure=(
            "the error of a recompute that skipped a cached compiled region (upstream's regression test), "
            "or the max abs gradient error against the un-checkpointed program"
        ),
        seconds=30,
    ),
)

CONTEXT_FIX = FixSpec(
    id="backward-context",
    summary=(
        "Run each compiled backward in its own copy of the backward's contextvars context, so two "
        "compiled backwards running at once (CPU + GPU, or two GPUs) no longer fail with "
        "'cannot enter context ... is already entered'."
    ),
    implementation="torchfix_sac_replay.backward_context:BackwardContextFix",
    distribution="torchfix-sac-replay",
    # 2.11 and 2.14-2.15 are inside on purpose: there the probe decides "not-needed" (2.11 hands no
    # context to backward; 2.14+ carries upstream's copy).
    targets={"torch": ">=2.11,<2.16"},
    # torch._dynamo, not the defining module torch._functorch._aot_autograd.runtime_wrappers: that one
    # cannot be imported on its own (torch's import cycle runtime_wrappers -> torch._dynamo ->
    # compiled_autograd -> runtime_wrappers), and torch._dynamo's import always completes it. No
    # compiled autograd function can be built before torch._dynamo is imported.
    triggers=("torch._dynamo",),
    order=35,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/185372",
        "https://github.com/pytorch/pytorch/pull/186659",
    ),
    # From the red runs of ``reproduction_backward_context.py`` on torch 2.12.0 and 2.13.0.
    signatures=(
        Signature(
            exception="RuntimeError",
            message=r"cannot enter context: <_contextvars\.Context object at 0x[0-9a-fA-F]+> is already entered",
            releases="torch >=2.12,<2.14",
            when=(
                "the backward() call runs the backwards of two torch.compile'd regions at the same time "
                "(a CPU region and a GPU region, or regions on two GPUs); intermittent, timing-dependent"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_sac_replay.reproduction:backward_context",
        measure=(
            "the 'cannot enter context ... is already entered' error of two compiled backwards at once "
            "(a CPU thread and a second device's), or the threads that ran them and the gradient"
        ),
        seconds=25,
    ),
)
