"""Data only: what torchfix-core reads at discovery (imports neither torch nor the patch)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

FIX = FixSpec(
    id="autotune",
    summary=(
        "Run Inductor's runtime autotuner (CachingAutotuner.bench / autotune_to_one_config / "
        "coordinate_descent_tuning) without the dispatch modes that declare ignore_compile_internals(), "
        "so a cold Triton kernel launched during selective-checkpoint recompute no longer fails strict replay."
    ),
    implementation="torchfix_autotune.patch:AutotuneFix",
    distribution="torchfix-autotune",
    # Probe run on CPU builds of 2.10.0, 2.11.0, 2.12.0, 2.13.0, 2.14.1, 2.15.0 (patch points identical);
    # the bug and the fix were shown on an H200 with 2.11.0 / 2.13.0 / 2.15.0. The probe decides inside.
    # 2.10 is left out: there a mode leaked by the filtered body and dropped on restore crashed a
    # later test process (segfault, matrix run 2026-11-29); the bug is absent there anyway (lenient).
    targets={"torch": ">=2.11,<2.16"},
    triggers=("torch._inductor.runtime.triton_heuristics",),
    order=100,
    # acts while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/pytorch/pull/176455",
        "https://github.com/Dao-AILab/quack/pull/204",
    ),
    # The op and wording of the CPU emulation's red run (tests/_emulation.py plain: torch's own SAC
    # strict-replay error, raised for the allocation a cold autotuner makes) on torch 2.13.0 and
    # 2.15.0; the GPU reproduction (``reproduction.py``, run by tests/test_gpu.py) fails on the same ops, with or without the
    # invocation index. Lenient replay (torch <= 2.12) raises nothing.
    signatures=(
        Signature(
            exception="RuntimeError",
            message=(
                r"aten\.(?:empty\.memory_format|empty_strided\.default|as_strided\.default|clone\.default|"
                r"zero_\.default) (?:invocation index \d+ )?encountered during backward but not found in storage"
            ),
            releases="torch >=2.13",
            when=(
                "the selective-checkpointed region is torch.compile'd for a GPU and its recompute launches a "
                "Triton kernel Inductor has not autotuned yet (a recompile during the recompute, cold caches)"
            ),
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_autotune.reproduction:cold_autotune_in_recompute",
        measure=(
            "SAC's strict-replay error for an op the cold autotuner dispatches in the recompute, or the "
            "gradients' largest difference from eager"
        ),
        needs_cuda=True,
        # one run with its interpreter: 31-46 s measured on an H100 with 2.11.0 (lenient replay: the whole
        # case, without and with the fix; a first version whose on-disk caches were not yet disabled).
        # Not yet measured where the bug shows (2.13+, it stops at the error): an estimate there;
        # test_gpu.py's two runs of the same case took 67 s (2.13.0) and 95 s (2.15.0) with pytest on an H200
        seconds=45,
    ),
)
