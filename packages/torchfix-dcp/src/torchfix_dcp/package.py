"""Data only: what torchfix-core reads at discovery (imports nothing but torchfix_core.spec)."""

from torchfix_core.spec import Effect, FixSpec, Reproduction, Signature

WHEN = (
    "the state dict came from torch.distributed.checkpoint's get_model_state_dict / get_state_dict of a "
    "model whose compiled blocks were wrapped by activation checkpointing afterwards "
    "(checkpoint_wrapper(torch.compile(block)), apply_activation_checkpointing after compiling), and is "
    "loaded into a model without that wrapping (plain, compiled only, or torch.compile(checkpoint_wrapper(block)))"
)

FIX = FixSpec(
    id="dcp-fqn-orig-mod",
    summary=(
        "Distributed-checkpoint state dicts of checkpoint_wrapper(torch.compile(block)) drop the compiler's "
        "_orig_mod prefix like every other compiled module; checkpoints written with it still load."
    ),
    implementation="torchfix_dcp.patch:DcpFqnOrigModFix",
    distribution="torchfix-dcp",
    # validated on 2.12.0, 2.13.0, 2.14.1, 2.15.0 (bug, red/green); _get_fqns read identical in logic on
    # 2.8.0, 2.9.1, 2.10.0, 2.11.0 (no upstream fix)
    targets={"torch": ">=2.8,<2.16"},
    # the module defining _get_fqns (imports torch.distributed.checkpoint first, hence default_planner,
    # whose create_default_local_load_plan the load side wraps); neither `import torch` nor
    # `import torch.distributed.checkpoint` imports it
    triggers=("torch.distributed.checkpoint.state_dict", "torch.distributed.checkpoint.default_planner"),
    order=60,
    # changes state-dict keys while the program runs; what torch compiles and caches is unchanged
    effect=Effect.RUNTIME,
    upstream=(
        "https://github.com/pytorch/torchtitan/issues/2622",
        "https://github.com/PrimeIntellect-ai/prime-rl/pull/957",
    ),
    # seen in the red runs of tests/_scenarios.py on 2.12.0, 2.13.0, 2.14.1, 2.15.0 (same wording). The
    # unexpected keys carry _orig_mod inside the key (after the block's name): a whole compiled model's
    # keys (leading "_orig_mod.") and ordinary missing / unexpected keys stay unclaimed
    signatures=(
        Signature(
            exception="RuntimeError",
            message=(
                r"Error\(s\) in loading state_dict for \w+:\s+Missing key\(s\) in state_dict: [^\n]*\n\s*"
                r"Unexpected key\(s\) in state_dict: \"[\w.]*\w\._orig_mod\."
            ),
            when=WHEN,
        ),
        # the other way round: a checkpoint with canonical keys (a plain model's, or written with the fix)
        # loaded by dcp.load into the state dict of a checkpoint_wrapper(torch.compile(block)) model on
        # torch without the fix, whose requested keys carry _orig_mod
        Signature(
            exception="RuntimeError",
            message=r"Missing key in checkpoint state_dict: [\w.]*\w\._orig_mod\.[\w.]+\.",
            when=(
                "the state dict passed to torch.distributed.checkpoint.load comes from get_model_state_dict / "
                "get_state_dict of a model with checkpoint_wrapper(torch.compile(block)) blocks, and the "
                "checkpoint was written from a model without that wrapping (or with this fix on)"
            ),
        ),
        # ... and a state dict with canonical keys set into that model's state dict on torch without the
        # fix (set_model_state_dict): its real keys, spelled with both wrappers' segments, are missing
        Signature(
            exception="RuntimeError",
            message=(
                r"Error\(s\) in loading state_dict for \w+:\s+Missing key\(s\) in state_dict: "
                r"\"[\w.]*_checkpoint_wrapped_module\._orig_mod\."
            ),
            when=(
                "a state dict with the plain model's keys is loaded with set_model_state_dict / set_state_dict "
                "into a model with checkpoint_wrapper(torch.compile(block)) blocks"
            ),
        ),
        Signature(
            symptom=(
                "set_model_state_dict(..., options=StateDictOptions(strict=False)) or load_state_dict(strict=False) "
                "of a checkpoint from a checkpoint_wrapper(torch.compile(block)) model returns every parameter of "
                "those blocks as missing and loads none of them: the model keeps its initial weights"
            )
        ),
    ),
    reproduction=Reproduction(
        run="torchfix_dcp.reproduction:orig_mod_keys",
        measure=(
            "state-dict keys of checkpoint_wrapper(torch.compile(block)) blocks carrying _orig_mod, and the "
            "keys a strict load into the plain model misses (strict=False: the tensors left unloaded)"
        ),
        seconds=15,
    ),
)
