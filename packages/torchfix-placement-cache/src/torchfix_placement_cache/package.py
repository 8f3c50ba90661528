"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

#: Inductor's generated size assert (``assert_size_stride``) when an artifact compiled for another
#: input shape is loaded; the same words follow a wrong fake kernel of a custom op, hence ``when=``
SIZE_ASSERT = r"expected size \d+==\d+, stride \d+==\d+ at dim=\d+"

FIX = FixSpec(
    id="placement-cache",
    summary="The AOTAutograd cache key of a DTensor input also covers its local shard shape and stride.",
    implementation="torchfix_placement_cache.patch:PlacementCacheFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch.distributed.tensor",),
    order=100,
    # keys DTensor inputs on their local shape (and device): keys differ from unpatched torch's by construction
    effect=Effect.CACHE_KEY,
    upstream=(
        "https://github.com/pytorch/pytorch/pull/173526",
        "https://github.com/pytorch/pytorch/issues/188390",
        "https://github.com/pytorch/pytorch/pull/188401",
    ),
    signatures=(
        # red run: 2 gloo ranks, global (3, 8) Shard(0), shared TORCHINDUCTOR_CACHE_DIR, torch 2.12
        # and 2.15 ("expected size 1==2, stride 8==8 at dim=0"; 4 ranks: "1==3")
        Signature(
            exception="AssertionError",
            message=SIZE_ASSERT,
            releases="torch >=2.12",
            when="ranks share a compile cache (one TORCHINDUCTOR_CACHE_DIR, or a mega-cache shipped between them) "
            "and hold DTensor inputs sharded unevenly (local shards of different shapes): a rank ran another "
            "rank's AOTAutograd artifact",
        ),
        Signature(
            symptom="a rank that shares a compile cache with others is served another rank's AOTAutograd artifact "
            "for its DTensor input (uneven local shards; on torch 2.12/2.13 also another local device): with "
            "Inductor's size asserts off it computes on the wrong shape, no error"
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_placement_cache.reproduction:placement",
        measure="what rank 1's unevenly sharded DTensor was served from rank 0's shared compile cache: Inductor's "
        "size assert, or its output difference against eager",
        ranks=2,
        seconds=40,
    ),
)

MAGI_FIX = FixSpec(
    id="magi-cache-key",
    summary="MagiCompiler's cache directory and AOT artifact path also cover the layout of DTensor inputs.",
    implementation="torchfix_placement_cache.magi:MagiCacheKeyFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.10,<2.14", "magi_compiler": ">=1.0,<2"},
    triggers=("magi_compiler",),
    order=110,
    # keys Magi's cache directory and AOT artifact path on DTensor layouts
    effect=Effect.CACHE_KEY,
    upstream=("MagiCompiler PR #89 (placement-aware cache key)",),
    signatures=(
        # red run: 2 gloo ranks, a SimpleFSDP-style module compiled Shard(0) then Replicate() under one
        # Magi cache root ("expected size 16==8, stride 8==8 at dim=0")
        Signature(
            exception="AssertionError",
            message=SIZE_ASSERT,
            when="MagiCompiler compiled the same model source before with other DTensor placements (e.g. "
            "Shard(0), then Replicate()) under the same Magi cache root: it loaded the other layout's artifact",
        ),
        Signature(
            symptom="a MagiCompiler build whose DTensor placements changed with unchanged source loads the old "
            "layout's artifact without compiling (0 Inductor compiles): where the shapes fit, a silently wrong "
            "collective (e.g. a 1-rank all-gather)"
        ),
    ),
    # Every Magi commit builds as 1.0.0 (versioningit's default), or 0.0.0 without versioningit (pip
    # install --no-build-isolation from a checkout): the version says nothing, so the probe (Magi's
    # live layout) decides and the range above documents where the fix was validated.
    unversioned=("magi_compiler",),
    # the red/green pair of tests/test_magi_cache_key.py: 2 builds of 2 ranks without the fix, 3 with it
    # (the third a warm start); one more (full_tensor()) where Magi saves no artifact of SimpleFSDP's
    # all-gather (torch 2.11). Measured on torch 2.13.0 CPU, Magi 8e2e47c, 2 cores: 15 s without and 23 s
    # with the fix on an idle machine, 30 s and 39 s under nox -s magi beside another test run, up to
    # 50 s and 76 s under a load average of 5
    reproduction=Reproduction(
        run="torchfix_placement_cache.reproduction_magi:magi_cache_key",
        measure="what the Replicate() build of a SimpleFSDP-style module was served from the Shard(0) build's "
        "Magi cache (0 Inductor compiles): Inductor's size assert, or its output difference against eager",
        ranks=2,
        libraries={"magi_compiler": ""},
        seconds=40,
    ),
)

BYPASS_KEY_FIX = FixSpec(
    id="aot-bypass-key",
    summary="AOTAutograd's fallback cache key (AOT precompile, unkeyable graph) is a fresh uuid4, not random.random().",
    implementation="torchfix_placement_cache.bypass_key:AotBypassKeyFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.10,<2.16"},
    triggers=("torch._functorch._aot_autograd.autograd_cache",),
    order=120,
    # replaces the fallback key's nonce: how AOT precompile keys an unkeyable graph
    effect=Effect.CACHE_KEY,
    upstream=(
        "https://github.com/pytorch/pytorch/pull/194451",
        "https://github.com/pytorch/pytorch/pull/191427",
        "https://github.com/pytorch/pytorch/issues/191323",
    ),
    signatures=(
        Signature(
            symptom="an AOT-precompiled graph (torch.compile(...).aot_compile, aot_compile_fullgraph) that "
            "AOTAutograd cannot key (an allow_in_graph callable, a process group or stream object) is served "
            "another graph's artifact: the later graphs of one Dynamo capture, or processes seeded alike that "
            "share a cache directory, return the first graph's results, no error"
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_placement_cache.reproduction:bypass",
        measure="graphs 2-3 of one Dynamo capture served graph 1's artifact: the cache hits and the output against eager",
        seconds=30,
    ),
)

AUTOCAST_KEY_FIX = FixSpec(
    id="aot-autocast-key",
    summary="The AOTAutograd cache key also covers the ambient autocast state (enabled, dtype) of every device.",
    implementation="torchfix_placement_cache.autocast_key:AotAutocastKeyFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.8,<2.13"},
    triggers=("torch._functorch._aot_autograd.autograd_cache",),
    order=130,
    # adds the autocast state to the AOTAutograd key
    effect=Effect.CACHE_KEY,
    upstream=(
        "https://github.com/pytorch/pytorch/pull/181564",
        "https://github.com/pytorch/pytorch/pull/191110",
    ),
    signatures=(
        Signature(
            symptom="a function compiled under torch.autocast(dtype=torch.bfloat16) and run again under "
            "dtype=torch.float16 (a recompile in one process, or a later process with the same cache directory) "
            "is served the bfloat16 artifact: bfloat16 outputs with the bfloat16 graph's values, no error"
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_placement_cache.reproduction:autocast",
        measure="a float16-autocast recompile served the bfloat16 artifact: its output dtype and max abs diff "
        "against eager",
        seconds=50,
    ),
)

HOP_BODY_KEY_FIX = FixSpec(
    id="aot-hop-body-key",
    summary="AOTAutogradCache also checks the nodes of nested graph bodies (checkpoint, custom autograd) before caching.",
    implementation="torchfix_placement_cache.hop_body_key:AotHopBodyKeyFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch._functorch._aot_autograd.autograd_cache",),
    order=140,
    # bypasses the AOTAutograd cache for graphs with an unsafe node in a nested body
    effect=Effect.CACHE_KEY,
    upstream=("https://github.com/pytorch/pytorch/pull/194658",),
    signatures=(
        Signature(
            symptom="a compiled function whose checkpoint (or custom autograd.Function) body calls an opaque "
            "callable (torch._dynamo.allow_in_graph) is served an earlier process's AOTAutograd artifact after "
            "the callable's behaviour changed (a global it reads, or its body): stale outputs and gradients, "
            "no error"
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_placement_cache.reproduction:hop_body",
        measure="a later process (SCALE=3) served the SCALE=2 process's artifact for a checkpoint body: its output "
        "and max abs gradient error against eager",
        seconds=60,
    ),
)
