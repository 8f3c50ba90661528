"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

FIX = FixSpec(
    id="mix-order-view-write",
    summary=(
        "Inductor's mix-order reduction rebinds the name of a reduction output that is a view into another "
        "buffer (NonOwningLayout) instead of writing into it, so that region of a gradient is never written; "
        "the fix writes through the view with copy_ (pytorch PR #193103), keyed in the compile caches."
    ),
    implementation="torchfix_mix_order.patch:MixOrderViewWriteFix",
    distribution="torchfix-mix-order",
    # validated: the CPU tests (probe, the generated wrapper line, key term, revert) on 2.11.0, 2.12.0,
    # 2.13.0 and 2.14.1; the prototype of the same change red without / green with on an H100 with torch
    # 2.11.0 (docs/results/gpu/round4/). 2.10.0 has the bug too but writes the line another way (no
    # final_reduce, no dtype cast): refused there (unknown layout), out of range. 2.15.0 carries
    # upstream's fix: inside the range so that the probe's reading of the live code decides, and says
    # not-needed there (validated on 2.15.0's CPU build and on the GPU)
    targets={"torch": ">=2.11,<2.16"},
    # SIMDScheduling lives in codegen.simd, FxGraphHashDetails in codecache; compile_fx and
    # autograd_cache, the modules that compute FX graph cache keys, import both at their own import,
    # so the fix is in place before the first key
    triggers=("torch._inductor.codegen.simd", "torch._inductor.codecache"),
    order=60,
    # generated wrapper code: the FX graph and AOTAutograd cache keys carry the fix's term (torchfix-core)
    effect=Effect.COMPILED,
    upstream=(
        "https://github.com/pytorch/pytorch/issues/193061",
        "https://github.com/pytorch/pytorch/pull/193103",
    ),
    # silent (no exception): what the H100 run with 2.11.0 showed and what the upstream report describes
    signatures=(
        Signature(
            symptom=(
                "silent: a parameter's gradient partly never written under torch.compile on CUDA (torch 2.10-2.14): "
                "NaN, garbage or the previous step's values in some chunk() slices of one shared table (an adaLN / "
                "DiT scale_shift_table feeding modulated norms), the other slices right; a grad norm that grows "
                "step after step"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_mix_order.reproduction:mix_order_view_write",
        measure=(
            "the gradient of a chunk()-ed shared table [1, 4, 2048] feeding two modulated LayerNorms of x "
            "[1, 16384, 2048], compiled, against a float64 eager reference: per chunk the max abs error, the "
            "relative error, and the chunks far above eager float32's error (never written)"
        ),
        needs_cuda=True,
        # the H100 run with torch 2.11.0: 35 s for eight compiles of the case; one compile here
        seconds=30,
    ),
)
