"""Data only: what torchfix-core reads at discovery (imports no torch)."""

from torchfix_core.spec import FixSpec

FIX = FixSpec(
    id="aot-fallback",
    summary="AOT compile falls back to JIT when AOT is unsupported (never on OOM/AssertionError); memo, strict mode.",
    implementation="torchfix_aot_fallback.patch:AOTFallbackFix",
    distribution="torchfix-aot-fallback",
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch._dynamo.aot_compile",),
    order=100,
    upstream=("MagiCompiler PR #89 (AOT -> JIT fallback; torch itself has no issue for it)",),
)
