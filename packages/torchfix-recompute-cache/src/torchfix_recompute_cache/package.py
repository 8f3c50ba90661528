"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, EnvSwitch, FixSpec, Reproduction, Signature

#: Turn Dynamo's LRU reordering off when the fix is applied (torchtitan PR #1991's placement) instead
#: of at the first activation checkpoint: for recompute schemes that do not go through
#: ``torch.utils.checkpoint`` (a framework's own re-forward).
ALWAYS = EnvSwitch(
    name="TORCHFIX_RECOMPUTE_CACHE_ALWAYS",
    default=False,
    help="turn Dynamo's LRU cache reordering off as soon as torch._dynamo is imported, not at the first checkpoint",
)

FIX = FixSpec(
    id="recompute-cache",
    summary=(
        "Activation checkpoint recompute of compiled code picks the forward's graph: Dynamo's LRU "
        "cache reordering is turned off once checkpointing is in use."
    ),
    implementation="torchfix_recompute_cache.patch:RecomputeCacheFix",
    distribution="torchfix-recompute-cache",
    # 2.10 is the first release with the switch (pytorch PR #167038); the bug is open upstream.
    targets={"torch": ">=2.10,<2.16"},
    # torch._dynamo, not torch.utils.checkpoint (imported by `import torch`: applying there would cost
    # every process the patch modules). Nothing is missed: the bug needs compiled code, and on
    # 2.10-2.15 the first checkpoint() imports torch._dynamo before it builds its saved-tensor hook.
    triggers=("torch._dynamo",),
    order=30,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/166926",
        "https://github.com/pytorch/pytorch/pull/167038",
        "https://github.com/pytorch/torchtitan/pull/1991",
        "https://github.com/pytorch/torchtitan/pull/2204",
    ),
    switches=(ALWAYS,),
    # seen in the red runs of ``reproduction.py``'s two_checkpointed_blocks and checkpointed_then_plain on
    # 2.10.0, 2.13.0 and 2.15.0: the same wording; 2.12+ appends a tip naming pytorch#166926 to every
    # CheckpointError, so it is not part of the pattern. The message is also what a checkpointed
    # function that saves other tensors in its recompute raises in eager code; the context (the
    # compiled function's AOTAutograd backward unpacking its saved tensors through the checkpoint's
    # hook) is what only compiled code inside the checkpoint prints. The red runs of real clients match
    # it unchanged (tests/corpus/recompute-cache/: transformers 5.22.2's Mamba2 and Bamba, decoder layers
    # compiled under its gradient checkpointing, two forwards before one backward, torch 2.13.0; one
    # process, torchrun, error.json); an eager recompute that saves other tensors stays unclaimed
    signatures=(
        Signature(
            exception="CheckpointError",
            message=(
                r"torch\.utils\.checkpoint: Recomputed values for the following tensors have different "
                r"metadata than during the forward pass"
            ),
            context=r'_aot_autograd[\\/][\s\S]*checkpoint\.py", line \d+, in unpack_hook',
            when=(
                "the checkpointed function (non-reentrant checkpoint, checkpoint_wrapper, SAC) calls "
                "torch.compile'd code that was recompiled between the forward and the recompute (e.g. "
                "automatic dynamic shapes after a new input shape), so the recompute ran another graph"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_recompute_cache.reproduction:recompute_cache",
        measure="the checkpoint's metadata error in the recompute, or the gradients' largest difference from eager",
        # one run with its interpreter: 7-12 s measured on 2.12.0 and 2.13.0 (2-core CPU, loaded)
        seconds=15,
    ),
)

BUDGET_RNG_FIX = FixSpec(
    id="budget-rng",
    summary=(
        "activation_memory_budget < 1 no longer recomputes dropout and other random ops in the backward "
        "with fresh randomness: the partitioner saves their forward outputs."
    ),
    implementation="torchfix_recompute_cache.budget_rng:BudgetRngFix",
    distribution="torchfix-recompute-cache",
    # validated on 2.8.0-2.15.0 (every release of the matrix has the budget API and the bug); open upstream
    targets={"torch": ">=2.8,<2.16"},
    # the module that defines the patched function; imported by the first torch.compile (through
    # torch._functorch.aot_autograd), never by `import torch`; and the compile caches' key module
    # (effect compiled: torchfix_core.spec.KEYED_CACHE_MODULE). torch._functorch.aot_autograd, which
    # every compile imports before it partitions, imports both on 2.8-2.15 (the partitioner alone
    # does not import the cache module on 2.8-2.10)
    triggers=("torch._functorch.partitioners", "torch._inductor.codecache"),
    # a partition is compiled code: artifacts compiled without the fix recompute dropout, so the FX
    # graph and AOTAutograd cache keys carry the fix's term
    effect=Effect.COMPILED,
    order=32,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/190758",
        "https://github.com/pytorch/pytorch/issues/190717",
        "https://github.com/pytorch/pytorch/pull/190759",
    ),
    signatures=(
        Signature(
            symptom=(
                "with torch._functorch.config.activation_memory_budget < 1, compiled dropout (or another "
                "random op) gets wrong gradients: the backward recomputes it with a fresh mask; no error"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_recompute_cache.reproduction_budget_rng:budget_rng",
        measure=(
            "the share of a compiled dropout's gradient that is wrong, and the largest difference, "
            "against the forward's mask at budgets 0.5 and 0"
        ),
        # one run with its interpreter: 7-17 s measured on 2.8.0, 2.12.0 and 2.13.0 (2-core CPU, loaded)
        seconds=20,
    ),
)
