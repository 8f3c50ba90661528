# Copyright (c) 2022-2026, NVIDIA CORPORATION & AFFILIATES. All rights reserved.
#
# See LICENSE for license information.
"""TransformerEngine's own regression tests for the inner-autocast FP8 recompute bug, ported verbatim.

Source: NVIDIA/TransformerEngine PR #3284 ("[PyTorch] Preserve FP8 recompute state for inner
autocast", commit 731f242a6, first released in TE 2.19.0), ``tests/pytorch/test_numerics.py``:
``test_gpt_full_activation_recompute_with_inner_autocast``,
``test_checkpoint_inner_autocast_is_an_fp8_recompute_region`` and
``test_checkpoint_with_mixed_fp8_regions_saves_only_fp8_recompute_state``, each for reentrant and
non-reentrant checkpointing. Their bodies and assertions are TE's, unchanged; the helpers they use
from that file and from ``tests/pytorch/utils.py`` (``_test_e2e_full_recompute``,
``_checkpointed_linear_backward``, ``get_causal_attn_mask``, ``reset_rng_states``, the ``126m``
``ModelConfig``) are copied beside them, ``ModelConfig`` cut down to the fields these tests read
(see ``README.md`` here). torchfix's harness (``tests/_te_gpu.py``) adds the ``gpu`` marker, the
skip without CUDA or TE, and one test of its own: the fix's state is the one this TE release calls for.

torchfix is whatever the environment makes it (installed = active at ``import torch``):

    python -m pytest packages/torchfix-fp8-recompute/tests/third_party/transformer_engine/test_te_pr3284.py -m gpu -v
    TORCHFIX_DISABLE=fp8-recompute python -m pytest ... -m gpu -v                                 # without the fix

Expected: TE <= 2.18 fails TE's tests without the fix and passes them with it; TE >= 2.19 passes
them either way, the fix reporting ``not-needed``. Needs an FP8-capable GPU (sm89+) and a TE
build; skipped cleanly elsewhere.
"""

from __future__ import annotations

import random

import pytest
import torch
from _te_gpu import (
    GPU_MARKS,
    require_cuda_and_te,
    test_fp8_recompute_fix_state_matches_te_release,  # noqa: F401 - torchfix's test, collected here
)

pytestmark = GPU_MARKS
require_cuda_and_te()

from transformer_engine.common import recipe  # noqa: E402
from transformer_engine.pytorch import (  # noqa: E402
    Linear,
    TransformerLayer,
    autocast,
    is_fp8_available,
    quantized_model_init,
)
from transformer_engine.pytorch import checkpoint as te_checkpoint  # noqa: E402
from transformer_engine.pytorch.distributed import (  # noqa: E402
    in_fp8_activation_recompute_phase,
    is_fp8_activation_recompute_enabled,
)
from transformer_engine.pytorch.quantization import FP8GlobalStateManager  # noqa: E402
from transformer_engine.pytorch.utils import init_method_normal, scaled_init_method_normal  # noqa: E402

fp8_available, reason_for_no_fp8 = is_fp8_available(return_reason=True)
all_boolean = [True, False]

# fp8_meta key written by FP8GlobalStateManager.copy_forward_fp8_meta_tensors_for_recompute
_FP8_RECOMPUTE_KEY = "global_fp8_buffer_pos_fwd_recompute"


# --- helpers copied from TransformerEngine's tests/pytorch/utils.py and test_numerics.py ----------

_rng_states = None


def reset_rng_states() -> None:
    """Revert to deterministic RNG state"""
    global _rng_states
    if _rng_states is None:
        torch.manual_seed(1234)
        torch.cuda.manual_seed(1234)
        random.seed(1234)
        _rng_states = (
            torch.get_rng_state(),
            torch.cuda.get_rng_state(),
            random.getstate(),
        )
    else:
        cpu_rng_state, cuda_rng_state, random_state = _rng_states
        torch.set_rng_state(cpu_rng_state)
        torch.cuda.set_rng_state(cuda_rng_state)
        random.setstate(random_state)


class ModelConfig:
    """TE's ``tests/pytorch/utils.py::ModelConfig``, only the fields these tests read."""

    def __init__(self, batch_size, max_seqlen_q, num_heads, head_dim_qk, num_layers=1, eps=1e-5):  # type: ignore[no-untyped-def]
        self.batch_size = batch_size
        self.max_seqlen_q = max_seqlen_q
        self.num_heads = num_heads
        self.head_dim_qk = head_dim_qk
        self.kv_channels = head_dim_qk
        self.hidden_size = num_heads * head_dim_qk
        self.num_layers = num_layers
        self.eps = eps


reset_rng_states()

model_configs = {
    "126m": ModelConfig(1, 2048, 12, 64, num_layers=12),
}


def get_causal_attn_mask(sq: int) -> torch.Tensor:
    return torch.triu(torch.ones(sq, sq, device="cuda"), diagonal=1).bool()


def _test_e2e_full_recompute(
    bs,
    dtype,
    config,
    fp8,
    recipe,
    fp8_model_params=False,
    recompute=False,
    use_reentrant=True,
    inner_autocast=False,
):
    reset_rng_states()
    FP8GlobalStateManager.reset()

    sigma = 0.023
    init_method = init_method_normal(sigma)
    output_layer_init_method = scaled_init_method_normal(sigma, config.num_layers)

    with quantized_model_init(enabled=fp8 and fp8_model_params, recipe=recipe):
        block = TransformerLayer(
            config.hidden_size,
            4 * config.hidden_size,
            config.num_heads,
            layernorm_epsilon=config.eps,
            init_method=init_method,
            output_layer_init_method=output_layer_init_method,
            hidden_dropout=0.1,
            attention_dropout=0.1,
            kv_channels=config.kv_channels,
            apply_residual_connection_post_layernorm=False,
            output_layernorm=False,
            params_dtype=dtype,
            fuse_qkv_params=True,
            device="cuda",
        )

    te_inp_hidden_states = torch.randn(
        (config.max_seqlen_q, bs, config.hidden_size),
        dtype=dtype,
        device="cuda",
        requires_grad=use_reentrant,
    )
    if use_reentrant:
        te_inp_hidden_states.retain_grad()
    te_inp_attn_mask = get_causal_attn_mask(config.max_seqlen_q)

    forward = block
    if inner_autocast:

        def forward(*args, **kwargs):
            with autocast(enabled=fp8, recipe=recipe):
                return block(*args, **kwargs)

    with autocast(enabled=fp8 and not inner_autocast, recipe=recipe):
        if recompute:
            te_out = te_checkpoint(
                forward,
                te_inp_hidden_states,
                attention_mask=te_inp_attn_mask,
                checkpoint_core_attention=False,
                distribute_saved_activations=False,
                tp_group=None,
                use_reentrant=use_reentrant,
            )
        else:
            te_out = forward(
                te_inp_hidden_states,
                attention_mask=te_inp_attn_mask,
                checkpoint_core_attention=False,
            )
    loss = te_out.sum()
    loss.backward()
    torch.cuda.synchronize()

    outputs = [te_out]
    names = ["output"]
    if use_reentrant:
        outputs.append(te_inp_hidden_states.grad)
        names.append("input")
    for name, p in block.named_parameters():
        if p.requires_grad:
            outputs.append(p.grad)
            names.append(name)

    return outputs, names


# --- TransformerEngine PR #3284's tests, unchanged -------------------------------------------------


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
@pytest.mark.parametrize("use_reentrant", all_boolean)
def test_gpt_full_activation_recompute_with_inner_autocast(use_reentrant, monkeypatch):
    """Check recompute numerics when FP8 autocast starts inside the checkpointed callable."""
    if not use_reentrant:
        # Non-reentrant checkpoint becomes non-deterministic with bias+GELU fusion.
        monkeypatch.setenv("NVTE_BIAS_GELU_NVFUSION", "0")

    dtype = torch.bfloat16
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    config = model_configs["126m"]

    # Reference also opens the autocast inside the callable, so the only difference
    # between the two runs is activation recompute.
    outputs, names = _test_e2e_full_recompute(
        1,
        dtype,
        config,
        True,
        fp8_recipe,
        recompute=False,
        use_reentrant=use_reentrant,
        inner_autocast=True,
    )

    # Before the fix, phase 1 skipped the stash while the recompute still restored it, which
    # surfaced as a KeyError on the recompute buffer lookup. Count both sides to pin that down.
    stash_counts, restore_counts = {}, {}
    stash_fn = FP8GlobalStateManager.copy_forward_fp8_meta_tensors_for_recompute
    restore_fn = FP8GlobalStateManager.get_old_fp8_meta_tensors_for_recompute

    def record_stash(fp8_meta):
        stash_fn(fp8_meta)
        if _FP8_RECOMPUTE_KEY in fp8_meta:
            stash_counts[id(fp8_meta)] = stash_counts.get(id(fp8_meta), 0) + 1

    def record_restore(fp8_meta):
        # The restore site is not gated on delayed scaling, but only delayed scaling stashes.
        if not fp8_meta["recipe"].delayed():
            restore_fn(fp8_meta)
            return
        key = id(fp8_meta)
        assert key in stash_counts, "Recompute restored a scale that was never stashed"
        restore_counts[key] = restore_counts.get(key, 0) + 1
        restore_fn(fp8_meta)

    monkeypatch.setattr(
        FP8GlobalStateManager,
        "copy_forward_fp8_meta_tensors_for_recompute",
        staticmethod(record_stash),
    )
    monkeypatch.setattr(
        FP8GlobalStateManager,
        "get_old_fp8_meta_tensors_for_recompute",
        staticmethod(record_restore),
    )

    outputs_recompute, _ = _test_e2e_full_recompute(
        1,
        dtype,
        config,
        True,
        fp8_recipe,
        recompute=True,
        use_reentrant=use_reentrant,
        inner_autocast=True,
    )

    assert stash_counts, "No FP8 module stashed a forward scale for the recompute phase"
    assert restore_counts == stash_counts, "Stash and restore of forward scales are unbalanced"

    for name, ref, test in zip(names, outputs, outputs_recompute):
        torch.testing.assert_close(
            test,
            ref,
            msg=f"Mismatch in tensor {name}",
            rtol=0.125,
            atol=0.0675,
        )


def _checkpointed_linear_backward(body, use_reentrant, *layers):
    """Run a checkpointed callable end to end and check the gradients are finite."""
    inp = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = te_checkpoint(body, inp, use_reentrant=use_reentrant)
        loss = out.float().sum()
    loss.backward()
    torch.cuda.synchronize()

    assert torch.isfinite(loss)
    assert inp.grad is not None and torch.isfinite(inp.grad).all()
    for layer in layers:
        assert layer.weight.grad is not None
        assert torch.isfinite(layer.weight.grad).all()


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
@pytest.mark.parametrize("use_reentrant", all_boolean)
def test_checkpoint_inner_autocast_is_an_fp8_recompute_region(use_reentrant):
    """An FP8 autocast opened inside a checkpointed callable is an FP8 recompute region."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()

    observed = []

    def body(value):
        outside = is_fp8_activation_recompute_enabled()
        with autocast(enabled=True, recipe=fp8_recipe):
            observed.append(
                (
                    outside,
                    is_fp8_activation_recompute_enabled(),
                    in_fp8_activation_recompute_phase(),
                )
            )
            return layer(value)

    _checkpointed_linear_backward(body, use_reentrant, layer)

    # One entry for the checkpointed forward, one for the recompute during backward. The
    # query is only an FP8 recompute region inside the autocast, in both phases.
    assert observed == [(False, True, False), (False, True, True)]


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
@pytest.mark.parametrize("use_reentrant", all_boolean)
def test_checkpoint_with_mixed_fp8_regions_saves_only_fp8_recompute_state(use_reentrant):
    """Only the inner FP8 region of a mixed checkpoint saves recompute metadata."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    non_fp8_layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()
    fp8_layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()

    def body(value):
        value = non_fp8_layer(value)
        with autocast(enabled=True, recipe=fp8_recipe):
            return fp8_layer(value)

    _checkpointed_linear_backward(body, use_reentrant, non_fp8_layer, fp8_layer)

    assert _FP8_RECOMPUTE_KEY not in non_fp8_layer.fp8_meta
    assert _FP8_RECOMPUTE_KEY in fp8_layer.fp8_meta
