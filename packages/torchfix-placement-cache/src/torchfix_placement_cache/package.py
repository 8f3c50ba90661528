"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import FixSpec

FIX = FixSpec(
    id="placement-cache",
    summary="The AOTAutograd cache key of a DTensor input also covers its local shard shape and stride.",
    implementation="torchfix_placement_cache.patch:PlacementCacheFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch.distributed.tensor",),
    order=100,
    upstream=(
        "https://github.com/pytorch/pytorch/pull/173526",
        "https://github.com/pytorch/pytorch/issues/188390",
        "https://github.com/pytorch/pytorch/pull/188401",
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
    upstream=("MagiCompiler PR #89 (placement-aware cache key)",),
    # Every Magi commit builds as 1.0.0 (versioningit's default), or 0.0.0 without versioningit (pip
    # install --no-build-isolation from a checkout): the version says nothing, so the probe (Magi's
    # live layout) decides and the range above documents where the fix was validated.
    unversioned=("magi_compiler",),
)

BYPASS_KEY_FIX = FixSpec(
    id="aot-bypass-key",
    summary="AOTAutograd's fallback cache key (AOT precompile, unkeyable graph) is a fresh uuid4, not random.random().",
    implementation="torchfix_placement_cache.bypass_key:AotBypassKeyFix",
    distribution="torchfix-placement-cache",
    targets={"torch": ">=2.10,<2.16"},
    triggers=("torch._functorch._aot_autograd.autograd_cache",),
    order=120,
    upstream=(
        "https://github.com/pytorch/pytorch/pull/194451",
        "https://github.com/pytorch/pytorch/pull/191427",
        "https://github.com/pytorch/pytorch/issues/191323",
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
    upstream=(
        "https://github.com/pytorch/pytorch/pull/181564",
        "https://github.com/pytorch/pytorch/pull/191110",
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
    upstream=("https://github.com/pytorch/pytorch/pull/194658",),
)
