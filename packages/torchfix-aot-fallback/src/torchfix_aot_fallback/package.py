"""Data only: what torchfix-core reads at discovery (imports no torch)."""

from torchfix_core.spec import EnvSwitch, FixSpec

#: no fallback at all: every AOT failure propagates (read by torchfix_aot_fallback.policy)
STRICT = EnvSwitch(
    "TORCHFIX_AOT_FALLBACK_STRICT", False, "1: never fall back from AOT to JIT; every AOT failure propagates"
)
#: the persistent memo of models AOT cannot handle (read by torchfix_aot_fallback.memo)
MEMO = EnvSwitch("TORCHFIX_AOT_FALLBACK_MEMO", True, "0: no persistent memo of models whose AOT compile failed")

FIX = FixSpec(
    id="aot-fallback",
    summary="AOT compile falls back to JIT when AOT is unsupported (never on OOM/AssertionError); memo, strict mode.",
    implementation="torchfix_aot_fallback.patch:AOTFallbackFix",
    distribution="torchfix-aot-fallback",
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch._dynamo.aot_compile",),
    order=100,
    upstream=("MagiCompiler PR #89 (AOT -> JIT fallback; torch itself has no issue for it)",),
    switches=(STRICT, MEMO),
)

MAGI_FIX = FixSpec(
    id="magi-aot-fallback",
    summary="MagiCompiler AOT falls back to JIT per compile state when AOT is unsupported (never on OOM/AssertionError).",
    implementation="torchfix_aot_fallback.magi:MagiAOTFallbackFix",
    distribution="torchfix-aot-fallback",
    targets={"torch": ">=2.10,<2.14", "magi_compiler": ">=1.0,<2"},
    triggers=("magi_compiler",),
    order=110,
    upstream=("MagiCompiler PR #89 (AOT -> JIT fallback)",),
    # Every Magi commit builds as 1.0.0 (versioningit's default), or 0.0.0 without versioningit (pip
    # install --no-build-isolation from a checkout): the version says nothing, so the probe (Magi's
    # live layout) decides and the range above documents where the fix was validated.
    unversioned=("magi_compiler",),
)
