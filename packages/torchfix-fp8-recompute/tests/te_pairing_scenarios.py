"""The regression scenarios of TE PR #3394 on TransformerEngine's real Python code, on CPU.

Run: ``python te_pairing_scenarios.py`` in an environment made by ``te_standins/make_env.py``. Prints
one JSON object: scenario name -> result. ``TORCHFIX_DISABLE=fp8-recompute-pairing`` gives the
unpatched behaviour (``fp8-recompute`` stays active: on TE 2.18 the callables below, which open their
own autocast as upstream's tests do, need it).

The module, the scenario frame (TE's FP8 state reset, the error kept, the stash facts read) and the
``eval-*`` scenarios are the shipped reproduction's (``torchfix_fp8_recompute.reproduction``: its
declared case is ``eval_module`` with the autocast around the checkpoint); the others are here. They
run on the platform the reproduction picks: here the CPU stand-in's
(``transformer_engine_torch.cpu_platform``).

What is real: ``te.checkpoint`` (reentrant ``_CheckpointFunction`` and the non-reentrant path),
``activation_recompute_forward``, ``te.autocast``, ``FP8GlobalStateManager`` (the per-module
recompute stash and its errors), and, unlike ``te_scenarios.py``, the module's own
``TransformerEngineBaseModule.prepare_forward`` / ``end_forward`` (the patched stash condition): the
reproduction's ``FP8BookkeepingLinear`` is a real ``TransformerEngineBaseModule`` subclass. What
stands in for hardware (the stand-in's ``cpu_platform``): the CUDA queries of ``te_scenarios.py``
plus "no stream is being captured"; ``torch.cuda.is_available`` answers True while the module is
constructed (TE's constructor requires CUDA); the module's input reports ``is_cuda`` to
``prepare_forward`` (a ``torch.Tensor`` subclass, used for that call only). The module builds its
delayed-scaling state without quantizer objects (TE's builds CUDA tensors); its "GEMM" is an fp32
matmul scaled by the FP8 scale it would quantize with, and it records the input amax as the cast
kernel does. Upstream's tests (``tests/pytorch/test_numerics.py``) also wrap the runs in bf16
``torch.autocast("cuda")``, which has no CPU meaning here and is left out.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import te_scenarios  # noqa: E402 - imports TE first, as a program does; the reproduction's platform
import transformer_engine.pytorch as te  # noqa: E402 - imported already by te_scenarios
from torchfix_fp8_recompute.reproduction import (  # noqa: E402
    STASH_KEY,
    Platform,
    eval_module,
    finite_grad,
    fp8_autocast,
    new_layers,
    random_input,
)
from torchfix_fp8_recompute.reproduction import pairing_scenario as scenario  # noqa: E402


def _state() -> tuple[Any, Any, Any]:
    import transformer_engine.pytorch.distributed as D

    return D, D.FP8GlobalStateManager, D.activation_recompute_forward


def _observe() -> list[bool]:
    D, _, _ = _state()
    return [bool(D.is_fp8_activation_recompute_enabled()), bool(D.in_fp8_activation_recompute_phase())]


def _fp8_callable(layer: Any, observed: list[Any] | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The checkpointed callable of upstream's tests: it opens the FP8 autocast itself and runs
    ``layer``; ``observed`` (when given) gets (recompute region, recompute phase) inside the autocast."""

    def fn(value: torch.Tensor) -> torch.Tensor:
        with fp8_autocast():
            if observed is not None:
                observed.append(_observe())
            return layer(value)  # type: ignore[no-any-return]

    return fn


# -- upstream's five tests (tests/pytorch/test_numerics.py, TE PR #3394), CPU forms; the first,
# test_checkpoint_eval_module_balances_fp8_recompute_state, is the reproduction's eval_module ---------


@scenario
def eval_after_train(result: dict[str, Any], where: Platform, use_reentrant: bool) -> None:
    """A training step, then the same module in eval() under the checkpoint (not an upstream test)."""
    (layer,) = new_layers(result, where, layer=1)
    fn = _fp8_callable(layer)
    for step, training in enumerate((True, False)):
        layer.train(training)
        inp = torch.full((16, 16), 0.5 * (step + 1), device=where.device, requires_grad=True)
        te.checkpoint(fn, inp, use_reentrant=use_reentrant).sum().backward()
        result.setdefault("steps_done", []).append(step)


@scenario
def nograd_accumulate(result: dict[str, Any], where: Platform, use_reentrant: bool) -> None:
    """test_checkpoint_without_autograd_does_not_accumulate_recompute_stashes."""
    (layer,) = new_layers(result, where, layer=1)
    inp = random_input(where, 0)
    fn = _fp8_callable(layer, result["observed"])
    with torch.no_grad():
        for _ in range(3):
            out = te.checkpoint(fn, inp, use_reentrant=use_reentrant)
            assert torch.isfinite(out).all()


@scenario
def reentrant_without_grad_input(result: dict[str, Any], where: Platform) -> None:
    """test_reentrant_checkpoint_without_grad_input_does_not_stash_fp8_metadata."""
    (layer,) = new_layers(result, where, layer=1)
    fn = _fp8_callable(layer, result["observed"])
    inp = random_input(where, 0)
    with torch.enable_grad():
        for _ in range(3):
            out = te.checkpoint(fn, inp, use_reentrant=True)
            assert torch.isfinite(out).all() and not out.requires_grad
    result["before_valid"] = {
        "stash_key": STASH_KEY in layer.fp8_meta,
        "buffer_lens": [len(s) for s in _state()[1].quantization_state.fp8_tensors_recompute_buffer],
        "first_module_entries": len(_state()[2]._is_first_fp8_module),
    }
    valid = random_input(where, 1, requires_grad=True)
    te.checkpoint(fn, valid, use_reentrant=True).float().sum().backward()
    result["inp_grad"] = finite_grad(valid)


@scenario
def nested_ineligible(result: dict[str, Any], where: Platform) -> None:
    """test_ineligible_reentrant_checkpoint_preserves_outer_recompute_context."""
    inner, tail = new_layers(result, where, inner=1, tail=2)

    def inner_body(value: torch.Tensor) -> torch.Tensor:
        result["observed"].append(_observe())
        return inner(value)

    def outer_body(value: torch.Tensor) -> torch.Tensor:
        with fp8_autocast():
            inner_out = te.checkpoint(inner_body, value.detach(), use_reentrant=True)
            return tail(value + inner_out)

    inp = random_input(where, 0, requires_grad=True)
    te.checkpoint(outer_body, inp, use_reentrant=False).float().sum().backward()
    result["inp_grad"] = finite_grad(inp)


@scenario
def nograd_forward_context(result: dict[str, Any], where: Platform) -> None:
    """test_checkpoint_without_autograd_preserves_forward_context."""
    (layer,) = new_layers(result, where, layer=1)
    layer.eval()
    inp = random_input(where, 0, requires_grad=True)
    with torch.no_grad():
        out = te.checkpoint(
            _fp8_callable(layer), inp, context_fn=lambda: (torch.enable_grad(), contextlib.nullcontext())
        )
    result["out_requires_grad"] = bool(out.requires_grad)
    out.float().sum().backward()
    result["inp_grad"] = finite_grad(inp)


# -- the silent form: a stash left by a checkpoint under no_grad is popped by a later recompute -----


@scenario
def nograd_stale(result: dict[str, Any], where: Platform, use_reentrant: bool) -> None:
    """Train step, an evaluation under no_grad, a plain training step (scale update), then a
    checkpointed training step: its recompute must use its own forward's scale."""
    (layer,) = new_layers(result, where, layer=1)
    events = result["events"]
    fn = _fp8_callable(layer)

    def train_step(x: torch.Tensor, checkpointed: bool) -> None:
        out = te.checkpoint(fn, x, use_reentrant=use_reentrant) if checkpointed else fn(x)
        out.sum().backward()

    train_step(torch.full((16, 16), 1.0, device=where.device, requires_grad=True), True)
    with torch.no_grad():
        te.checkpoint(fn, torch.full((16, 16), 2.0, device=where.device), use_reentrant=use_reentrant)
    train_step(torch.full((16, 16), 4.0, device=where.device, requires_grad=True), False)
    start = len(events)
    train_step(torch.full((16, 16), 8.0, device=where.device, requires_grad=True), True)
    last = [e for e in events[start:] if e.get("layer") == "layer" and e["fp8"]]
    result["last_forward_scale"] = [e["scale"] for e in last if not e["phase"]]
    result["last_recompute_scale"] = [e["scale"] for e in last if e["phase"]]


def scenarios(where: Platform) -> dict[str, Callable[[], dict[str, Any]]]:
    out: dict[str, Callable[[], dict[str, Any]]] = {}
    for reentrant in (True, False):
        mode = "reentrant" if reentrant else "nonreentrant"
        for training in (True, False):
            out[f"eval-{mode}-recompute-{'train' if training else 'eval'}"] = lambda r=reentrant, t=training: (
                eval_module(where, r, t)
            )
        out[f"eval-after-train-{mode}"] = lambda r=reentrant: eval_after_train(where, r)
        out[f"nograd-accumulate-{mode}"] = lambda r=reentrant: nograd_accumulate(where, r)
        out[f"nograd-stale-{mode}"] = lambda r=reentrant: nograd_stale(where, r)
    out["reentrant-without-grad-input"] = lambda: reentrant_without_grad_input(where)
    out["nested-ineligible"] = lambda: nested_ineligible(where)
    out["nograd-forward-context"] = lambda: nograd_forward_context(where)
    return out


def main() -> None:
    import torchfix_core
    import transformer_engine

    states = {r.id: (str(r.state), r.reason) for r in torchfix_core.status()}
    out: dict[str, Any] = {"te": str(transformer_engine.__version__), "torch": torch.__version__}
    out["fix_state"], out["fix_reason"] = states.get("fp8-recompute-pairing", ("missing", ""))
    out["fp8_recompute_state"] = states.get("fp8-recompute", ("missing", ""))[0]
    from torchfix_fp8_recompute import pairing

    # Does the code now running carry PR #3394's change (TE's own, or torchfix's copy)?
    out["code_has_pr3394"] = {h.path: h.fixed(pairing._function(h).__code__) for h in pairing.HUNKS}
    out["code_is_torchfix"] = {
        h.path: pairing._function(h).__code__.co_filename.startswith(pairing.FILENAME_PREFIX) for h in pairing.HUNKS
    }
    on = te_scenarios.where()
    with on.active():
        for name, fn in scenarios(on).items():
            out[name] = fn()
    from torchfix_core.testing import report_of

    out["report"] = report_of("fp8-recompute-pairing")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
