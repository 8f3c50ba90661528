"""The upstream regression scenarios of TE PR #3284, run on TransformerEngine's real Python code on CPU.

Run: ``python te_scenarios.py`` in an environment made by ``te_standins/make_env.py`` (TE's Python
sources + the stand-in extension). Prints one JSON object: scenario name -> result. Run it with
``TORCHFIX_DISABLE=fp8-recompute`` for the unpatched behaviour.

What is real: ``te.checkpoint`` (both the reentrant ``_CheckpointFunction`` and the non-reentrant
``_CheckpointFrame`` paths), ``activation_recompute_forward``, ``te.autocast`` / ``fp8_autocast``,
``FP8GlobalStateManager`` (global amax buffers, the recompute stash and its ``KeyError``), the
delayed-scaling recipe state (``RecipeState`` in TE 2.x, ``FP8TensorMeta`` + tensors as
``module/base.py`` builds them in TE 1.x), and the getters read through ``module/base.py``'s own
by-name bindings, the ones TE's modules call.

What stands in for hardware (no CUDA on a CPU torch): ``_get_cuda_rng_state`` /
``_set_cuda_rng_state`` of ``distributed.py`` save/restore nothing, ``torch.cuda.current_device`` /
``get_device_properties`` answer "device 0, compute capability 9.0" (TE's FP8-support check), and the FP8 layer below is not ``te.Linear`` (its forward
needs CUDA kernels) but :class:`DelayedScalingLayer`, which makes exactly the delayed-scaling calls of
``TransformerEngineBaseModule.prepare_forward`` / ``end_forward`` (TE 2.18 ``module/base.py``
1535-1584; same calls in TE 1.13 ``module/base.py``), computes a bf16-free fp32 matmul scaled by the
FP8 scale it would quantize with, and writes the input amax as the cast kernel does.
"""

from __future__ import annotations

import importlib
import json
import traceback
import types
from typing import Any

import torch
import transformer_engine.pytorch as te
import transformer_engine.pytorch.distributed as D
import transformer_engine.pytorch.module.base as B
from transformer_engine.common.recipe import DelayedScaling

MANAGER = D.FP8GlobalStateManager
STASH_KEY = "global_fp8_buffer_pos_fwd_recompute"


def install_hardware_standins() -> None:
    """CPU answers to the CUDA-only queries TE's bookkeeping makes (see the module docstring)."""
    D._get_cuda_rng_state = lambda *args, **kwargs: torch.get_rng_state()
    D._set_cuda_rng_state = lambda *args, **kwargs: None
    # TE's FP8-support check asks for the compute capability of the current device: answer sm90.
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(major=9, minor=0)


def fp8_autocast(enabled: bool) -> Any:
    recipe = DelayedScaling()
    if hasattr(te, "autocast"):  # TE >= 2.8
        return te.autocast(enabled=enabled, recipe=recipe)
    return te.fp8_autocast(enabled=enabled, fp8_recipe=recipe)


def _recipe_state(recipe: Any, forward: bool) -> Any:
    """The delayed-scaling state ``TransformerEngineBaseModule.init_fp8_meta_tensors`` creates."""
    n = 3 if forward else 2
    for name in ("transformer_engine.pytorch.quantization", "transformer_engine.pytorch.fp8"):
        try:
            module = importlib.import_module(name)
        except ImportError:  # quantization.py exists from TE 2.8 (fp8.py before)
            continue
        state_cls = getattr(module, "RecipeState", None)
        if state_cls is not None:  # TE 2.x
            return state_cls.create(
                recipe, mode="forward" if forward else "backward", num_quantizers=n, device=torch.device("cpu")
            )
    import transformer_engine_torch as tex  # TE 1.x: module/base.py set_meta_tensor

    meta = tex.FP8TensorMeta()
    meta.scale = torch.ones(n, dtype=torch.float32)
    meta.scale_inv = torch.ones(n, dtype=torch.float32)
    meta.amax_history = torch.zeros(recipe.amax_history_len, n, dtype=torch.float32)
    return meta


class DelayedScalingLayer(torch.nn.Module):
    """The delayed-scaling bookkeeping of a TE module's forward, without the CUDA kernels."""

    def __init__(self, name: str, events: list[Any]) -> None:
        super().__init__()
        self.name = name
        self.events = events
        self.weight = torch.nn.Parameter(torch.eye(8) + 0.01 * torch.arange(64.0).reshape(8, 8))
        # module/base.py __init__ and init_fp8_metadata (TE 1.13 / 2.18)
        self.fp8_meta: dict[str, Any] = {"fp8_checkpoint": False, "fp8_group": None, "num_gemms": 1}

    def _init_fp8_meta(self) -> None:
        recipe = MANAGER.get_fp8_recipe()
        self.fp8_meta["recipe"] = recipe
        self.fp8_meta["fp8_group"] = MANAGER.get_fp8_group()
        self.fp8_meta["fp8_max_fwd"] = recipe.fp8_format.value.max_fwd
        self.fp8_meta["fp8_max_bwd"] = recipe.fp8_format.value.max_bwd
        if "scaling_fwd" not in self.fp8_meta:
            self.fp8_meta["scaling_fwd"] = _recipe_state(recipe, forward=True)
            self.fp8_meta["scaling_bwd"] = _recipe_state(recipe, forward=False)
            self.fp8_meta["fp8_checkpoint"] = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fp8 = MANAGER.is_fp8_enabled()
        phase = B.in_fp8_activation_recompute_phase()
        stashed = popped = False
        if fp8 and phase:  # base.py: recompute forward restores the stash
            MANAGER.get_old_fp8_meta_tensors_for_recompute(self.fp8_meta)
            popped = True
        elif fp8:
            self._init_fp8_meta()
            MANAGER.add_fp8_tensors_to_global_buffer(self.fp8_meta)
            if self.training and B.is_fp8_activation_recompute_enabled():
                MANAGER.copy_forward_fp8_meta_tensors_for_recompute(self.fp8_meta)
                stashed = True
        scale = 1.0
        if fp8:
            meta = self.fp8_meta["scaling_fwd"]
            scale = float(meta.scale[0])
            with torch.no_grad():  # the cast kernel records the input amax
                meta.amax_history[0][0] = x.detach().abs().max()
        out = (x @ self.weight) * scale
        if fp8 and phase:  # base.py end_forward
            MANAGER.restore_fp8_meta_tensors(self.fp8_meta)
        self.events.append(
            {"layer": self.name, "fp8": fp8, "phase": phase, "stashed": stashed, "popped": popped, "scale": scale}
        )
        return out


def run(scenario: str, reentrant: bool, steps: int = 2) -> dict[str, Any]:
    MANAGER.reset()
    D.activation_recompute_forward._is_first_fp8_module.clear()
    events: list[Any] = []
    fp8_layer = DelayedScalingLayer("fp8", events)
    plain_layer = DelayedScalingLayer("plain", events)
    params = [fp8_layer.weight, plain_layer.weight]

    def body(x: torch.Tensor) -> torch.Tensor:
        outside = MANAGER.is_fp8_enabled()
        if scenario == "nonfp8":
            return plain_layer(x)
        with fp8_autocast(enabled=True):
            inside = MANAGER.is_fp8_enabled()
            events.append({"body": [outside, inside, B.in_fp8_activation_recompute_phase()]})
            y = fp8_layer(x)
        return plain_layer(y) if scenario == "mixed" else y

    result: dict[str, Any] = {"error": None}
    try:
        for step in range(steps):
            x = torch.full((4, 8), 0.5 * (step + 1), requires_grad=True)
            out = te.checkpoint(body, x, use_reentrant=reentrant)
            out.sum().backward()
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p -= 0.01 * p.grad
                    p.grad = None
            events.append({"step_done": step})
    except Exception as exc:  # noqa: BLE001 - the unpatched failure is the result
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
        result["traceback"] = traceback.format_exc()  # the text Python prints (signature tests)
    result["events"] = events
    result["stash_key"] = {"fp8": STASH_KEY in fp8_layer.fp8_meta, "plain": STASH_KEY in plain_layer.fp8_meta}
    fwd = [e["scale"] for e in events if e.get("layer") == "fp8" and e["fp8"] and not e["phase"]]
    rec = [e["scale"] for e in events if e.get("layer") == "fp8" and e["fp8"] and e["phase"]]
    result["fp8_forward_scales"], result["fp8_recompute_scales"] = fwd, rec
    result["body_states"] = [e["body"] for e in events if "body" in e]
    return result


SCENARIOS = [(s, r) for s in ("inner", "nonfp8", "mixed") for r in (True, False)]


def main() -> None:
    install_hardware_standins()
    import torchfix_core
    import transformer_engine

    row = next(r for r in torchfix_core.status() if r.id == "fp8-recompute")
    out: dict[str, Any] = {"te": str(transformer_engine.__version__), "fix_state": row.state, "fix_reason": row.reason}
    for scenario, reentrant in SCENARIOS:
        out[f"{scenario}-{'reentrant' if reentrant else 'nonreentrant'}"] = run(scenario, reentrant)
    from torchfix_core.testing import report_of

    out["report"] = report_of("fp8-recompute")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
