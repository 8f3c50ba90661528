"""The regression scenarios of TE PR #3394 on TransformerEngine's real Python code, on CPU.

Run: ``python te_pairing_scenarios.py`` in an environment made by ``te_standins/make_env.py``. Prints
one JSON object: scenario name -> result. ``TORCHFIX_DISABLE=fp8-recompute-pairing`` gives the
unpatched behaviour (``fp8-recompute`` stays active: on TE 2.18 the callables below, which open their
own autocast as upstream's tests do, need it).

What is real: ``te.checkpoint`` (reentrant ``_CheckpointFunction`` and the non-reentrant path),
``activation_recompute_forward``, ``te.autocast``, ``FP8GlobalStateManager`` (the per-module
recompute stash and its errors), and, unlike ``te_scenarios.py``, the module's own
``TransformerEngineBaseModule.prepare_forward`` / ``end_forward`` (the patched stash condition):
:class:`StandinLinear` is a real ``TransformerEngineBaseModule`` subclass. What stands in for
hardware: the CUDA queries of ``te_scenarios.install_hardware_standins`` plus "no stream is being
captured"; ``torch.cuda.is_available`` answers True while the module is constructed (TE's
constructor requires CUDA); the module's input reports ``is_cuda`` to ``prepare_forward`` (a
``torch.Tensor`` subclass, used for that call only); ``set_meta_tensor`` builds the delayed-scaling
state on CPU without quantizer objects (TE's builds CUDA tensors); the "GEMM" is an fp32 matmul
scaled by the FP8 scale it would quantize with, and the input amax is recorded as the cast kernel
does. Upstream's tests (``tests/pytorch/test_numerics.py``) also wrap the runs in bf16
``torch.autocast("cuda")``, which has no CPU meaning here and is left out.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Concatenate, Iterator, ParamSpec

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import te_scenarios  # noqa: E402 - the hardware stand-ins and the recipe state of the #3284 scenarios
import transformer_engine.pytorch as te  # noqa: E402 - imported already by te_scenarios

STASH_KEY = "global_fp8_buffer_pos_fwd_recompute"


def install_hardware_standins() -> None:
    te_scenarios.install_hardware_standins()
    torch.cuda.is_current_stream_capturing = lambda: False  # quantization.py fp8_graph_capturing()


@contextlib.contextmanager
def _cuda_available() -> Iterator[None]:
    saved = torch.cuda.is_available
    torch.cuda.is_available = lambda: True
    try:
        yield
    finally:
        torch.cuda.is_available = saved


class _CudaLooking(torch.Tensor):
    """An input that answers ``is_cuda`` as it would on a GPU (prepare_forward's device check)."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def make_layer_class() -> type:
    import transformer_engine.pytorch.module.base as B

    class StandinLinear(B.TransformerEngineBaseModule):
        """A TE base module: TE's prepare_forward / end_forward around a CPU stand-in GEMM."""

        def __init__(self, name: str, events: list[Any], seed: int) -> None:
            with _cuda_available():
                super().__init__()
            self.tag = name
            self.events = events
            g = torch.Generator().manual_seed(seed)
            self.weight = torch.nn.Parameter(torch.eye(16) + 0.05 * torch.randn(16, 16, generator=g))

        def _get_weight_tensors(self) -> list[torch.Tensor]:
            return [self.weight]

        def _get_weight_quantizers(self) -> list[Any]:
            return [None]

        def set_meta_tensor(self, fwd: bool, recipe: Any) -> None:
            key = "scaling_fwd" if fwd else "scaling_bwd"
            self.fp8_meta[key] = te_scenarios._recipe_state(recipe, forward=fwd)
            self.quantizers[key] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            phase = te_scenarios.B.in_fp8_activation_recompute_phase()
            self.prepare_forward(x.as_subclass(_CudaLooking))
            try:
                scale = 1.0
                if self.fp8:
                    meta = self.fp8_meta["scaling_fwd"]
                    scale = float(meta.scale[0])
                    with torch.no_grad():
                        meta.amax_history[0][0] = x.detach().abs().max()
                self.events.append(
                    {"layer": self.tag, "fp8": self.fp8, "phase": phase, "training": self.training, "scale": scale}
                )
                return (x @ self.weight) * scale
            finally:
                self.end_forward()

    return StandinLinear


def _state() -> tuple[Any, Any, Any]:
    import transformer_engine.pytorch.distributed as D

    return D, D.FP8GlobalStateManager, D.activation_recompute_forward


def _reset() -> None:
    D, manager, arf = _state()
    manager.reset()
    arf._is_first_fp8_module.clear()


def _observe() -> list[bool]:
    D, _, _ = _state()
    return [bool(D.is_fp8_activation_recompute_enabled()), bool(D.in_fp8_activation_recompute_phase())]


def _facts(result: dict[str, Any], layers: dict[str, Any]) -> None:
    """What upstream's ``_assert_fp8_recompute_state_drained`` and the leak tests look at."""
    _, manager, arf = _state()
    buffer = manager.quantization_state.fp8_tensors_recompute_buffer
    result["buffer_lens"] = [len(stash) for stash in buffer]
    result["first_module_entries"] = len(arf._is_first_fp8_module)
    for name, layer in layers.items():
        meta = layer.fp8_meta
        restored = None
        if "updated_scale_fwd" in meta and "scaling_fwd" in meta:
            restored = bool(torch.equal(meta["scaling_fwd"].scale, meta["updated_scale_fwd"]))
        grad = layer.weight.grad
        result[name] = {
            "stash_key": STASH_KEY in meta,
            "stash_len": len(buffer[meta[STASH_KEY]]) if STASH_KEY in meta and meta[STASH_KEY] < len(buffer) else None,
            "restored": restored,
            "grad": None if grad is None else bool(torch.isfinite(grad).all()),
        }


P = ParamSpec("P")


def scenario(body: Callable[Concatenate[dict[str, Any], P], None]) -> Callable[P, dict[str, Any]]:
    """Make ``body(result, *args, **kwargs)`` a scenario: TE's FP8 state reset first, the exception it raises
    recorded as the result's ``error`` (the unpatched failure is the result), then the stash facts of
    the layers it made with :func:`_layers`."""

    @functools.wraps(body)
    def run(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        _reset()
        result: dict[str, Any] = {"error": None, "observed": []}
        try:
            body(result, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the unpatched failure is the result
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
            result["traceback"] = traceback.format_exc()  # the text Python prints (signature tests)
        _facts(result, result.pop("layers", {}))
        result.pop("events", None)
        return result

    return run


def _layers(result: dict[str, Any], **seeds: int) -> list[Any]:
    """New :class:`StandinLinear` modules (name -> weight seed), one class, logging to
    ``result["events"]``; the scenario's facts are read from them."""
    cls = make_layer_class()
    events = result.setdefault("events", [])
    result["layers"] = {name: cls(name, events, seed) for name, seed in seeds.items()}
    return list(result["layers"].values())


def _fp8_callable(layer: Any, observed: list[Any] | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The checkpointed callable of upstream's tests: it opens the FP8 autocast itself and runs
    ``layer``; ``observed`` (when given) gets (recompute region, recompute phase) inside the autocast."""

    def fn(value: torch.Tensor) -> torch.Tensor:
        with _autocast():
            if observed is not None:
                observed.append(_observe())
            return layer(value)

    return fn


def _finite_grad(tensor: torch.Tensor) -> bool:
    return tensor.grad is not None and bool(torch.isfinite(tensor.grad).all())


def _autocast() -> Any:
    return te_scenarios.fp8_autocast(enabled=True)


# -- upstream's five tests (tests/pytorch/test_numerics.py, TE PR #3394), CPU forms ----------------


@scenario
def eval_module(result: dict[str, Any], use_reentrant: bool, recompute_training: bool) -> None:
    """test_checkpoint_eval_module_balances_fp8_recompute_state."""
    (layer,) = _layers(result, layer=1)
    layer.eval()

    def fn(value: torch.Tensor) -> torch.Tensor:
        with _autocast():
            return layer(value * 2)

    inp = torch.randn(16, 16, generator=torch.Generator().manual_seed(0), requires_grad=True)
    loss = te.checkpoint(fn, inp, use_reentrant=use_reentrant).float().sum()
    layer.train(recompute_training)
    loss.backward()
    result["inp_grad"] = _finite_grad(inp)


@scenario
def eval_after_train(result: dict[str, Any], use_reentrant: bool) -> None:
    """A training step, then the same module in eval() under the checkpoint (not an upstream test)."""
    (layer,) = _layers(result, layer=1)
    fn = _fp8_callable(layer)
    for step, training in enumerate((True, False)):
        layer.train(training)
        inp = torch.full((16, 16), 0.5 * (step + 1), requires_grad=True)
        te.checkpoint(fn, inp, use_reentrant=use_reentrant).sum().backward()
        result.setdefault("steps_done", []).append(step)


@scenario
def nograd_accumulate(result: dict[str, Any], use_reentrant: bool) -> None:
    """test_checkpoint_without_autograd_does_not_accumulate_recompute_stashes."""
    (layer,) = _layers(result, layer=1)
    inp = torch.randn(16, 16, generator=torch.Generator().manual_seed(0))
    fn = _fp8_callable(layer, result["observed"])
    with torch.no_grad():
        for _ in range(3):
            out = te.checkpoint(fn, inp, use_reentrant=use_reentrant)
            assert torch.isfinite(out).all()


@scenario
def reentrant_without_grad_input(result: dict[str, Any]) -> None:
    """test_reentrant_checkpoint_without_grad_input_does_not_stash_fp8_metadata."""
    (layer,) = _layers(result, layer=1)
    fn = _fp8_callable(layer, result["observed"])
    inp = torch.randn(16, 16, generator=torch.Generator().manual_seed(0))
    with torch.enable_grad():
        for _ in range(3):
            out = te.checkpoint(fn, inp, use_reentrant=True)
            assert torch.isfinite(out).all() and not out.requires_grad
    result["before_valid"] = {
        "stash_key": STASH_KEY in layer.fp8_meta,
        "buffer_lens": [len(s) for s in _state()[1].quantization_state.fp8_tensors_recompute_buffer],
        "first_module_entries": len(_state()[2]._is_first_fp8_module),
    }
    valid = torch.randn(16, 16, generator=torch.Generator().manual_seed(1), requires_grad=True)
    te.checkpoint(fn, valid, use_reentrant=True).float().sum().backward()
    result["inp_grad"] = _finite_grad(valid)


@scenario
def nested_ineligible(result: dict[str, Any]) -> None:
    """test_ineligible_reentrant_checkpoint_preserves_outer_recompute_context."""
    inner, tail = _layers(result, inner=1, tail=2)

    def inner_body(value: torch.Tensor) -> torch.Tensor:
        result["observed"].append(_observe())
        return inner(value)

    def outer_body(value: torch.Tensor) -> torch.Tensor:
        with _autocast():
            inner_out = te.checkpoint(inner_body, value.detach(), use_reentrant=True)
            return tail(value + inner_out)

    inp = torch.randn(16, 16, generator=torch.Generator().manual_seed(0), requires_grad=True)
    te.checkpoint(outer_body, inp, use_reentrant=False).float().sum().backward()
    result["inp_grad"] = _finite_grad(inp)


@scenario
def nograd_forward_context(result: dict[str, Any]) -> None:
    """test_checkpoint_without_autograd_preserves_forward_context."""
    (layer,) = _layers(result, layer=1)
    layer.eval()
    inp = torch.randn(16, 16, generator=torch.Generator().manual_seed(0), requires_grad=True)
    with torch.no_grad():
        out = te.checkpoint(
            _fp8_callable(layer), inp, context_fn=lambda: (torch.enable_grad(), contextlib.nullcontext())
        )
    result["out_requires_grad"] = bool(out.requires_grad)
    out.float().sum().backward()
    result["inp_grad"] = _finite_grad(inp)


# -- the silent form: a stash left by a checkpoint under no_grad is popped by a later recompute -----


@scenario
def nograd_stale(result: dict[str, Any], use_reentrant: bool) -> None:
    """Train step, an evaluation under no_grad, a plain training step (scale update), then a
    checkpointed training step: its recompute must use its own forward's scale."""
    (layer,) = _layers(result, layer=1)
    events = result["events"]
    fn = _fp8_callable(layer)

    def train_step(x: torch.Tensor, checkpointed: bool) -> None:
        out = te.checkpoint(fn, x, use_reentrant=use_reentrant) if checkpointed else fn(x)
        out.sum().backward()

    train_step(torch.full((16, 16), 1.0, requires_grad=True), True)
    with torch.no_grad():
        te.checkpoint(fn, torch.full((16, 16), 2.0), use_reentrant=use_reentrant)
    train_step(torch.full((16, 16), 4.0, requires_grad=True), False)
    start = len(events)
    train_step(torch.full((16, 16), 8.0, requires_grad=True), True)
    last = [e for e in events[start:] if e.get("layer") == "layer" and e["fp8"]]
    result["last_forward_scale"] = [e["scale"] for e in last if not e["phase"]]
    result["last_recompute_scale"] = [e["scale"] for e in last if e["phase"]]


def scenarios() -> dict[str, Callable[[], dict[str, Any]]]:
    out: dict[str, Callable[[], dict[str, Any]]] = {}
    for reentrant in (True, False):
        mode = "reentrant" if reentrant else "nonreentrant"
        for training in (True, False):
            out[f"eval-{mode}-recompute-{'train' if training else 'eval'}"] = lambda r=reentrant, t=training: (
                eval_module(r, t)
            )
        out[f"eval-after-train-{mode}"] = lambda r=reentrant: eval_after_train(r)
        out[f"nograd-accumulate-{mode}"] = lambda r=reentrant: nograd_accumulate(r)
        out[f"nograd-stale-{mode}"] = lambda r=reentrant: nograd_stale(r)
    out["reentrant-without-grad-input"] = reentrant_without_grad_input
    out["nested-ineligible"] = nested_ineligible
    out["nograd-forward-context"] = nograd_forward_context
    return out


def main() -> None:
    install_hardware_standins()
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
    for name, fn in scenarios().items():
        out[name] = fn()
    from torchfix_core.testing import report_of

    out["report"] = report_of("fp8-recompute-pairing")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
