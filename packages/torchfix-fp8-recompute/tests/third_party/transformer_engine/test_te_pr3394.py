# Copyright (c) 2022-2026, NVIDIA CORPORATION & AFFILIATES. All rights reserved.
#
# See LICENSE for license information.
"""TransformerEngine's own regression tests for FP8 recompute metadata pairing, ported verbatim.

Source: NVIDIA/TransformerEngine PR #3394 ("[PyTorch] Pair delayed-scaling FP8 recompute metadata
per module"; merge commit 9f39a391c, in TE 2.20.2), ``tests/pytorch/test_numerics.py``:
``test_checkpoint_eval_module_balances_fp8_recompute_state`` (reentrant and not, recompute in
training and eval mode), ``test_checkpoint_without_autograd_does_not_accumulate_recompute_stashes``,
``test_reentrant_checkpoint_without_grad_input_does_not_stash_fp8_metadata``,
``test_ineligible_reentrant_checkpoint_preserves_outer_recompute_context`` and
``test_checkpoint_without_autograd_preserves_forward_context``, with the helper
``_assert_fp8_recompute_state_drained`` the PR adds. Bodies and assertions are TE's, unchanged (see
``README.md`` here). torchfix's harness (``tests/_te_gpu.py``) adds the ``gpu`` marker, the skip
without CUDA or TE, and one test of its own: the fix's state is the one this TE release calls for.

torchfix is whatever the environment makes it (installed = active at ``import torch``):

    python -m pytest packages/torchfix-fp8-recompute/tests/third_party/transformer_engine/test_te_pr3394.py -m gpu -v
    TORCHFIX_DISABLE=fp8-recompute-pairing python -m pytest ... -m gpu -v                          # without the fix

Expected: TE 2.18-2.19 fail TE's tests without the fix and pass them with it (on TE 2.18 the
inner-autocast callables also need ``fp8-recompute``, left on); TE 2.20.2 passes them either way,
the fix reporting ``not-needed``. Needs an FP8-capable GPU (sm89+) and a TE build; skipped cleanly
elsewhere.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from _te_gpu import (
    GPU_MARKS,
    require_cuda_and_te,
    test_fp8_recompute_pairing_fix_state_matches_te_release,  # noqa: F401 - torchfix's test, collected here
)

pytestmark = GPU_MARKS
require_cuda_and_te()

from transformer_engine.common import recipe  # noqa: E402
from transformer_engine.pytorch import Linear, autocast, is_fp8_available  # noqa: E402
from transformer_engine.pytorch import checkpoint as te_checkpoint  # noqa: E402
from transformer_engine.pytorch.distributed import (  # noqa: E402
    in_fp8_activation_recompute_phase,
    is_fp8_activation_recompute_enabled,
)
from transformer_engine.pytorch.quantization import FP8GlobalStateManager  # noqa: E402

fp8_available, reason_for_no_fp8 = is_fp8_available(return_reason=True)
all_boolean = [True, False]

# fp8_meta key written by FP8GlobalStateManager.copy_forward_fp8_meta_tensors_for_recompute
_FP8_RECOMPUTE_KEY = "global_fp8_buffer_pos_fwd_recompute"


# --- TE PR #3394, tests/pytorch/test_numerics.py (verbatim) -------------------------------------


def _assert_fp8_recompute_state_drained(*layers):
    """Check that each module consumed its stash and restored its live scale."""
    recompute_buffer = FP8GlobalStateManager.quantization_state.fp8_tensors_recompute_buffer
    assert len(recompute_buffer) == len(layers)
    for layer in layers:
        assert _FP8_RECOMPUTE_KEY in layer.fp8_meta
        assert len(recompute_buffer[layer.fp8_meta[_FP8_RECOMPUTE_KEY]]) == 0
        assert "updated_scale_fwd" in layer.fp8_meta
        assert torch.equal(
            layer.fp8_meta["scaling_fwd"].scale,
            layer.fp8_meta["updated_scale_fwd"],
        )


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
@pytest.mark.parametrize("use_reentrant", all_boolean)
@pytest.mark.parametrize("recompute_training", all_boolean)
def test_checkpoint_eval_module_balances_fp8_recompute_state(recompute_training, use_reentrant):
    """An eval module must stash metadata for the recompute forward."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda().eval()

    def body(value):
        with autocast(enabled=True, recipe=fp8_recipe):
            # Exercise an intermediate input whose grad state differs between the
            # reentrant and non-reentrant checkpoint forward implementations.
            return layer(value * 2)

    inp = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = te_checkpoint(body, inp, use_reentrant=use_reentrant).float().sum()

    layer.train(recompute_training)
    loss.backward()
    torch.cuda.synchronize()

    assert inp.grad is not None and torch.isfinite(inp.grad).all()
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()
    _assert_fp8_recompute_state_drained(layer)


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
def test_checkpoint_without_autograd_does_not_accumulate_recompute_stashes():
    """Checkpoint calls without autograd must not leave unreachable metadata."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()
    inp = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16)
    observed = []

    def body(value):
        with autocast(enabled=True, recipe=fp8_recipe):
            observed.append(
                (
                    is_fp8_activation_recompute_enabled(),
                    in_fp8_activation_recompute_phase(),
                )
            )
            return layer(value)

    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(3):
            out = te_checkpoint(body, inp)
            assert torch.isfinite(out).all()

    recompute_buffer = FP8GlobalStateManager.quantization_state.fp8_tensors_recompute_buffer
    assert _FP8_RECOMPUTE_KEY not in layer.fp8_meta
    assert all(len(stashed) == 0 for stashed in recompute_buffer)
    assert observed == [(False, False)] * 3


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
def test_reentrant_checkpoint_without_grad_input_does_not_stash_fp8_metadata():
    """A reentrant checkpoint that cannot receive backward must not save recompute state."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()
    observed = []

    def body(value):
        with autocast(enabled=True, recipe=fp8_recipe):
            observed.append(
                (
                    is_fp8_activation_recompute_enabled(),
                    in_fp8_activation_recompute_phase(),
                )
            )
            return layer(value)

    inp = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16)
    with torch.enable_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(3):
            out = te_checkpoint(body, inp, use_reentrant=True)
            assert torch.isfinite(out).all()
            assert not out.requires_grad

    assert _FP8_RECOMPUTE_KEY not in layer.fp8_meta
    assert not FP8GlobalStateManager.quantization_state.fp8_tensors_recompute_buffer
    assert observed == [(False, False)] * 3

    valid_inp = torch.randn(
        16,
        16,
        device="cuda",
        dtype=torch.bfloat16,
        requires_grad=True,
    )
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = te_checkpoint(body, valid_inp, use_reentrant=True).float().sum()
    loss.backward()
    torch.cuda.synchronize()

    assert valid_inp.grad is not None and torch.isfinite(valid_inp.grad).all()
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()
    assert observed[-2:] == [(True, False), (True, True)]
    _assert_fp8_recompute_state_drained(layer)


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
def test_ineligible_reentrant_checkpoint_preserves_outer_recompute_context():
    """An inner checkpoint without grad inputs must inherit its outer recompute phase."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    inner = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()
    tail = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda()
    observed = []

    def inner_body(value):
        observed.append(
            (
                is_fp8_activation_recompute_enabled(),
                in_fp8_activation_recompute_phase(),
            )
        )
        return inner(value)

    def outer_body(value):
        with autocast(enabled=True, recipe=fp8_recipe):
            inner_out = te_checkpoint(inner_body, value.detach(), use_reentrant=True)
            return tail(value + inner_out)

    inp = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = te_checkpoint(outer_body, inp, use_reentrant=False).float().sum()
    loss.backward()
    torch.cuda.synchronize()

    assert observed == [(True, False), (True, True)]
    assert inp.grad is not None and torch.isfinite(inp.grad).all()
    assert inner.weight.grad is None
    assert tail.weight.grad is not None and torch.isfinite(tail.weight.grad).all()
    _assert_fp8_recompute_state_drained(inner, tail)


@pytest.mark.skipif(not fp8_available, reason=reason_for_no_fp8)
def test_checkpoint_without_autograd_preserves_forward_context():
    """The direct path must preserve a context that explicitly enables gradients."""
    FP8GlobalStateManager.reset()
    fp8_recipe = recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)
    layer = Linear(16, 16, bias=False, params_dtype=torch.float32).cuda().eval()
    inp = torch.randn(16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def body(value):
        with autocast(enabled=True, recipe=fp8_recipe):
            return layer(value)

    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        out = te_checkpoint(
            body,
            inp,
            context_fn=lambda: (torch.enable_grad(), nullcontext()),
        )

    assert out.requires_grad
    out.float().sum().backward()
    torch.cuda.synchronize()
    assert inp.grad is not None and torch.isfinite(inp.grad).all()
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()
    recompute_buffer = FP8GlobalStateManager.quantization_state.fp8_tensors_recompute_buffer
    assert _FP8_RECOMPUTE_KEY not in layer.fp8_meta
    assert all(len(stashed) == 0 for stashed in recompute_buffer)
