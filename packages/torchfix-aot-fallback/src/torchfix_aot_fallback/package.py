"""Data only: what torchfix-core reads at discovery (imports no torch)."""

from torchfix_core.spec import Effect, EnvSwitch, FixSpec, Reproduction, Signature

#: no fallback at all: every AOT failure propagates (read by torchfix_aot_fallback.policy)
STRICT = EnvSwitch(
    "TORCHFIX_AOT_FALLBACK_STRICT", False, "1: never fall back from AOT to JIT; every AOT failure propagates"
)
#: the persistent memo of models AOT cannot handle (read by torchfix_aot_fallback.memo)
MEMO = EnvSwitch("TORCHFIX_AOT_FALLBACK_MEMO", True, "0: no persistent memo of models whose AOT compile failed")

#: The failures of torch's AOT compile that the fix turns into a JIT fallback, from the red runs of
#: tests/test_signatures.py (torch 2.11.0 and 2.15.0: same wording). A graph break's message is the
#: one a plain fullgraph torch.compile prints, so that signature needs the AOT frame in the traceback.
SIGNATURES = (
    Signature(
        exception="Unsupported",
        # any graph break / unsupported construct but a model's own exception (never a fallback); the
        # traceback tells an AOT compile apart
        message=r"^(?!Observed exception)\S",
        context=r'aot_compile\.py", line \d+, in aot_compile_fullgraph',
        when="raised by an AOT compile (torch.compile(fn, fullgraph=True).aot_compile(...)): the same graph "
        "break from a plain torch.compile(fullgraph=True) call has no JIT to fall back to",
    ),
    Signature(
        exception="RuntimeError",
        message=r"does not implement SerializableCallable\.",
        when="the backend of an AOT compile returned a callable AOT cannot save",
    ),
    Signature(
        exception="RuntimeError",
        message=r"^GuardManager check failed, reason: ",
        when="an AOT artifact (loaded with torch.compiler.load_compiled_function, or fresh from .aot_compile) "
        "is called with inputs its guards reject (another shape, rank, dtype or device)",
    ),
)

FIX = FixSpec(
    id="aot-fallback",
    summary="AOT compile falls back to JIT when AOT is unsupported (never on OOM/AssertionError); memo, strict mode.",
    implementation="torchfix_aot_fallback.patch:AOTFallbackFix",
    distribution="torchfix-aot-fallback",
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch._dynamo.aot_compile",),
    order=100,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=("MagiCompiler PR #89 (AOT -> JIT fallback; torch itself has no issue for it)",),
    switches=(STRICT, MEMO),
    signatures=SIGNATURES,
    reproduction=Reproduction(
        run="torchfix_aot_fallback.reproduction:aot_fallback",
        measure="the AOT compile's exception for a graph-breaking function, or its output against eager",
        seconds=10,
    ),
)

MAGI_FIX = FixSpec(
    id="magi-aot-fallback",
    summary="MagiCompiler AOT falls back to JIT per compile state when AOT is unsupported (never on OOM/AssertionError).",
    implementation="torchfix_aot_fallback.magi:MagiAOTFallbackFix",
    distribution="torchfix-aot-fallback",
    targets={"torch": ">=2.10,<2.14", "magi_compiler": ">=1.0,<2"},
    triggers=("magi_compiler",),
    order=110,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=("MagiCompiler PR #89 (AOT -> JIT fallback)",),
    # Every Magi commit builds as 1.0.0 (versioningit's default), or 0.0.0 without versioningit (pip
    # install --no-build-isolation from a checkout): the version says nothing, so the probe (Magi's
    # live layout) decides and the range above documents where the fix was validated.
    unversioned=("magi_compiler",),
    # From the red runs of tests/test_signatures.py (torch 2.13.0, the Magi checkout's own torch).
    signatures=(
        Signature(
            exception="ValueError",
            message=r"^tuple\.index\(x\): x not in tuple",
            context=r'magi_compiler_base\.py", line \d+, in aot_compile',
            when="MagiCompiler's AOT mode (MAGI_COMPILE_AOT=1) on torch 2.10-2.13: Magi's aot_compile looks for a "
            "'self' closure variable of AOTCompiledFunction.save_compiled_function, which those torch lack",
        ),
        Signature(
            exception="Unsupported",
            message=r"^(?!Observed exception)\S",  # as aot-fallback's: not the model's own exception
            context=r'magi_compiler_base\.py", line \d+, in aot_compile',
            when="raised by MagiCompiler's AOT compile of a model (MAGI_COMPILE_AOT=1): graph breaks, SimpleFSDP "
            "code; Magi's JIT path would run it",
        ),
    ),
    # written from tests/_magi_aot_driver.py's "plain" scenario, not run here (no Magi on this
    # machine): seconds is an estimate; tests/test_magi_aot_fallback.py runs it under nox -s magi
    reproduction=Reproduction(
        run="torchfix_aot_fallback.reproduction:magi_aot_fallback",
        measure="the exception that aborts a plain model's call in Magi's AOT mode, or its output against eager",
        libraries={"magi_compiler": ""},
        seconds=30,
    ),
)
