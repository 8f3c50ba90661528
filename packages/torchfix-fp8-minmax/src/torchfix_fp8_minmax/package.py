"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

FIX = FixSpec(
    id="fp8-minmax-store",
    summary=(
        "Inductor's Triton minimum/maximum emitted in the tl.where form instead of tl.minimum/maximum(..., "
        "tl.PropagateNan.ALL), which Triton 3.8 mis-lowers next to transposed fp8 stores; plus an FX graph "
        "cache key term, so kernels cached before the fix are not reused."
    ),
    implementation="torchfix_fp8_minmax.patch:MinMaxWhereFix",
    distribution="torchfix-fp8-minmax",
    # validated: red without / green with the fix on an H200 with torch 2.14.1+cu130 and the Triton it
    # pins, 3.8.0 (the pair of the upstream reports); the CPU tests (codegen, key term, revert) on 2.14.1.
    # torch 2.15.0 pins Triton 3.9.0, where the same sweep wrote eager's bytes (docs/investigated.md);
    # 2.13 and older emit the tl.where helpers on CUDA (the probe says not-needed when forced)
    targets={"torch": ">=2.14,<2.15"},
    # TritonOverrides lives in codegen.triton, FxGraphHashDetails in codecache (which codegen.triton
    # imports); compile_fx and autograd_cache, the modules that compute FX graph cache keys, import
    # codegen.triton at their own import, so the fix is in place before the first key
    triggers=("torch._inductor.codegen.triton", "torch._inductor.codecache"),
    order=60,
    # generated Triton code: the FX graph and AOTAutograd cache keys carry the fix's term (torchfix-core),
    # detailed by the min/max codegen in effect
    effect=Effect.COMPILED,
    upstream=(
        "https://github.com/triton-lang/triton/issues/11111",
        "https://github.com/pytorch/pytorch/pull/186933",
        "https://github.com/pytorch/ao/pull/4652",
        "https://github.com/pytorch/ao/pull/4657",
    ),
    # silent (no exception): what the GPU run with 2.14.1 showed (wrong bytes, some non-finite, in the
    # transposed fp8 copy) and what the upstream reports describe in training
    signatures=(
        Signature(
            symptom=(
                "silent: a compiled float8 cast (amax scaling, clamp, .to(float8)) that also writes a transposed "
                "copy stores wrong bytes, some of them NaN/Inf, in that copy on some launch configs (torch 2.14 "
                "with Triton 3.8): intermittent NaN/Inf or loss spikes in compiled float8 training, no error"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_fp8_minmax.reproduction:fp8_minmax_store",
        measure=(
            "launch configs of the compiled float8 cast that wrote other bytes than eager: the bytes differing "
            "and the non-finite values in the transposed float8 copy"
        ),
        needs_cuda=True,
        # one run with its interpreter: about 35 s on an H200 (the GPU test's two runs of the same sweep
        # with torch 2.14.1, 74 s in all)
        seconds=45,
    ),
)
