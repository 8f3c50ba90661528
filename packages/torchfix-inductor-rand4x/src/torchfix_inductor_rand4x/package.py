"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

FIX = FixSpec(
    id="inductor-rand4x-dropout",
    summary=(
        "Inductor's 4x random path (triton_helpers.rand4x in 1-D CUDA Triton kernels) turned off unless opted "
        "in with TORCHINDUCTOR_USE_RAND4X=1, as torch 2.15 does (pytorch#198333): compiled dropout masks no "
        "longer repeat in groups of four, and a checkpointed region's recompute applies the forward's mask; "
        "plus a compile cache key term, so kernels cached before the fix are not reused."
    ),
    implementation="torchfix_inductor_rand4x.patch:Rand4xOffFix",
    distribution="torchfix-inductor-rand4x",
    # the probe read on the live objects of 2.12.0 (no 4x path: not-needed), 2.13.0 and 2.14.1 (the
    # 4x path without upstream's gate: applied; the codegen checked in a 1-D CUDA kernel context on
    # the CPU) and 2.15.0 (config.use_rand4x, off by default: not-needed); the GPU harm is measured by
    # the shipped reproduction (needs_cuda)
    targets={"torch": ">=2.12,<2.16"},
    # TritonOverrides lives in codegen.triton, FxGraphHashDetails in codecache (which codegen.triton
    # imports); compile_fx and autograd_cache import codegen.triton at their own import, so the fix is
    # in place before the first key is computed
    triggers=("torch._inductor.codegen.triton", "torch._inductor.codecache"),
    order=62,
    # generated Triton code: the FX graph and AOTAutograd cache keys carry the fix's term (torchfix-core),
    # detailed by the random codegen in effect (off, or opted in with TORCHINDUCTOR_USE_RAND4X=1)
    effect=Effect.COMPILED,
    upstream=("https://github.com/pytorch/pytorch/issues/198333",),
    # silent (no exception): the two symptoms of the upstream report
    signatures=(
        Signature(
            symptom=(
                "silent: compiled dropout on a CUDA GPU (torch 2.13-2.14, torch.compile with Inductor) repeats its "
                "mask in groups of four adjacent elements when its input comes from a materialised layout change "
                "such as x.transpose(1, 2).contiguous(): a quarter of the mask is independent and the keep rate "
                "is off by several sigma, no error"
            ),
        ),
        Signature(
            symptom=(
                "silent: under activation checkpointing with compiled dropout on a CUDA GPU (torch 2.13-2.14), the "
                "recompute applies another dropout mask than the forward did, so the gradients do not match the "
                "forward (loss and gradients differ from eager or from the run without checkpointing), no error"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_inductor_rand4x.reproduction:rand4x_dropout",
        measure=(
            "fraction of dropout mask elements that differ between the checkpointed forward and its recompute "
            "(the mask the backward used), the group-of-four repetition of the forward mask (adjacent elements "
            "agreeing within vs across groups of four) and the keep rate"
        ),
        needs_cuda=True,
        # two small compiles (a forward, and a forward+backward under checkpoint) of an 8 x 64 x 4096 dropout
        seconds=40,
    ),
)
