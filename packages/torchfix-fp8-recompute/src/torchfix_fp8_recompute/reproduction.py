"""The reproductions of fp8-recompute and fp8-recompute-pairing (``FixSpec.reproduction``:
:func:`fp8_recompute`, :func:`fp8_recompute_pairing`), and the cases behind them, which the
package's tests run too (``tests/te_scenarios.py``, ``tests/te_pairing_scenarios.py``).

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests run; imported only when a reproduction runs (it imports torch and TransformerEngine inside its
functions).

Both bugs are in TransformerEngine's Python bookkeeping of FP8 delayed scaling under
``te.checkpoint`` (the per-module stash of scale and amax that the recompute pops), not in a CUDA
kernel. The layers here make TE's own delayed-scaling calls around a plain matmul scaled by the FP8
scale it would quantize with, instead of TE's FP8 GEMM: :func:`delayed_scaling_layer` the calls of
``TransformerEngineBaseModule.prepare_forward`` / ``end_forward`` (TE 1.13-2.20), :func:`te_layer` a
real ``TransformerEngineBaseModule`` whose own ``prepare_forward`` / ``end_forward`` run (TE 2.18+).
Where they run is a :class:`Platform` (:func:`platform`): a CUDA GPU with TE's real extension; on a
machine without one, only where TE's compiled extension is the CPU stand-in of this package's tests
(``tests/te_standins/``), which offers the CPU answers to the CUDA queries TE's Python code makes as
``transformer_engine_torch.cpu_platform``; elsewhere the reproductions cannot run.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import traceback
from typing import TYPE_CHECKING, Any, Callable, Concatenate, ContextManager, ParamSpec, Protocol

from torchfix_core.reproduction import Outcome, cannot_run, not_observed, observed

if TYPE_CHECKING:
    import torch

#: the key TE's recompute stash lookup reads from a module's ``fp8_meta``
STASH_KEY = "global_fp8_buffer_pos_fwd_recompute"
#: the recompute's errors when a module stashed nothing (both fixes), or its stash is empty (pairing)
NO_STASH = f"KeyError: '{STASH_KEY}'"
EMPTY_STASH = "IndexError: pop from an empty deque"


class Platform(Protocol):
    """Where the cases run: the device of their tensors, and what TE's CUDA queries need there."""

    device: torch.device

    def active(self) -> ContextManager[None]:
        """Around a whole case."""

    def constructing(self) -> ContextManager[None]:
        """Around the construction of a TE module."""

    def module_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as ``prepare_forward`` gets it."""


class _Cuda:
    """A CUDA GPU with TE's real extension: TE's CUDA queries answer for themselves."""

    def __init__(self) -> None:
        import torch

        self.device = torch.device("cuda", torch.cuda.current_device())

    def active(self) -> ContextManager[None]:
        return contextlib.nullcontext()

    def constructing(self) -> ContextManager[None]:
        return contextlib.nullcontext()

    def module_input(self, x: torch.Tensor) -> torch.Tensor:
        return x


def platform() -> Platform | str:
    """Where the cases run here (importing TransformerEngine, which applies the fixes), or why they
    cannot: a CUDA GPU; else the CPU stand-in of TE's extension where it is installed (the module
    docstring); else none."""
    import torch

    try:
        importlib.import_module("transformer_engine.pytorch")
    except (ImportError, OSError, RuntimeError) as exc:  # a TE build without the CUDA libraries it loads
        return f"TransformerEngine does not import here ({type(exc).__name__}: {str(exc)[:200]})"
    if torch.cuda.is_available():
        return _Cuda()
    try:
        extension = importlib.import_module("transformer_engine_torch")  # TE's loader put it in sys.modules
    except ImportError:
        extension = None
    standin: Platform | None = getattr(extension, "cpu_platform", None)
    if standin is None:
        return "needs a CUDA GPU: TransformerEngine's checkpoint and modules ask CUDA for the RNG state and the device"
    return standin


def _fp8_unavailable() -> str:
    """Why TE's delayed-scaling FP8 autocast refuses this device ("" where it accepts it)."""
    import transformer_engine.pytorch.distributed as dist

    available, reason = dist.FP8GlobalStateManager.is_fp8_available()
    return "" if available else f"TransformerEngine's FP8 is not available on this device: {reason}"


def fp8_autocast(enabled: bool = True) -> ContextManager[Any]:
    """TE's FP8 autocast with the delayed-scaling recipe (``te.autocast``; ``te.fp8_autocast`` before TE 2.8)."""
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling

    recipe = DelayedScaling()
    if hasattr(te, "autocast"):
        return te.autocast(enabled=enabled, recipe=recipe)  # type: ignore[no-any-return]
    return te.fp8_autocast(enabled=enabled, fp8_recipe=recipe)  # type: ignore[no-any-return]


def recipe_state(recipe: Any, forward: bool, device: torch.device) -> Any:
    """The delayed-scaling state ``TransformerEngineBaseModule`` creates for its GEMM's tensors, on
    ``device``, without quantizer objects (the layers here quantize nothing)."""
    import torch

    n = 3 if forward else 2
    for name in ("transformer_engine.pytorch.quantization", "transformer_engine.pytorch.fp8"):
        try:
            module = importlib.import_module(name)
        except ImportError:  # quantization.py exists from TE 2.8 (fp8.py before)
            continue
        state_cls = getattr(module, "RecipeState", None)
        if state_cls is not None:  # TE 2.x
            return state_cls.create(recipe, mode="forward" if forward else "backward", num_quantizers=n, device=device)
    import transformer_engine_torch as tex  # TE 1.x: module/base.py set_meta_tensor

    meta = tex.FP8TensorMeta()
    meta.scale = torch.ones(n, dtype=torch.float32, device=device)
    meta.scale_inv = torch.ones(n, dtype=torch.float32, device=device)
    meta.amax_history = torch.zeros(recipe.amax_history_len, n, dtype=torch.float32, device=device)
    return meta


# -- fp8-recompute (TE PR #3284): the callable opens its own FP8 autocast ---------------------------------


@functools.cache
def delayed_scaling_layer() -> type:
    """The class of a layer that makes exactly the delayed-scaling calls of
    ``TransformerEngineBaseModule.prepare_forward`` / ``end_forward`` (TE 2.18 ``module/base.py``
    1535-1584; the same calls in TE 1.13), reading the getters through ``module/base.py``'s own
    by-name bindings (the ones TE's modules call), around an fp32 matmul scaled by the FP8 scale it
    would quantize with; it writes the input amax as the cast kernel does. Each forward appends an
    event (layer, FP8 on, recompute phase, stashed, popped, scale) to the list it was given."""
    import torch
    import transformer_engine.pytorch.distributed as dist
    import transformer_engine.pytorch.module.base as base

    manager = dist.FP8GlobalStateManager

    class DelayedScalingLayer(torch.nn.Module):
        def __init__(self, name: str, events: list[Any], device: torch.device) -> None:
            super().__init__()
            self.name = name
            self.events = events
            self.weight = torch.nn.Parameter((torch.eye(8) + 0.01 * torch.arange(64.0).reshape(8, 8)).to(device))
            # module/base.py __init__ and init_fp8_metadata (TE 1.13 / 2.18)
            self.fp8_meta: dict[str, Any] = {"fp8_checkpoint": False, "fp8_group": None, "num_gemms": 1}

        def _init_fp8_meta(self) -> None:
            recipe = manager.get_fp8_recipe()
            self.fp8_meta["recipe"] = recipe
            self.fp8_meta["fp8_group"] = manager.get_fp8_group()
            self.fp8_meta["fp8_max_fwd"] = recipe.fp8_format.value.max_fwd
            self.fp8_meta["fp8_max_bwd"] = recipe.fp8_format.value.max_bwd
            if "scaling_fwd" not in self.fp8_meta:
                self.fp8_meta["scaling_fwd"] = recipe_state(recipe, True, self.weight.device)
                self.fp8_meta["scaling_bwd"] = recipe_state(recipe, False, self.weight.device)
                self.fp8_meta["fp8_checkpoint"] = True

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            fp8 = manager.is_fp8_enabled()
            phase = base.in_fp8_activation_recompute_phase()
            stashed = popped = False
            if fp8 and phase:  # base.py: the recompute's forward restores the stash
                manager.get_old_fp8_meta_tensors_for_recompute(self.fp8_meta)
                popped = True
            elif fp8:
                self._init_fp8_meta()
                manager.add_fp8_tensors_to_global_buffer(self.fp8_meta)
                if self.training and base.is_fp8_activation_recompute_enabled():
                    manager.copy_forward_fp8_meta_tensors_for_recompute(self.fp8_meta)
                    stashed = True
            scale = 1.0
            if fp8:
                meta = self.fp8_meta["scaling_fwd"]
                scale = float(meta.scale[0])
                with torch.no_grad():  # the cast kernel records the input amax
                    meta.amax_history[0][0] = x.detach().abs().max()
            out = (x @ self.weight) * scale
            if fp8 and phase:  # base.py end_forward
                manager.restore_fp8_meta_tensors(self.fp8_meta)
            self.events.append(
                {"layer": self.name, "fp8": fp8, "phase": phase, "stashed": stashed, "popped": popped, "scale": scale}
            )
            return out

    return DelayedScalingLayer


#: the callables of :func:`recompute_steps`: ``inner`` opens the FP8 autocast itself around an FP8
#: layer; ``nonfp8`` has no FP8; ``mixed`` runs a second layer after the inner autocast
RECOMPUTE_SCENARIOS = ("inner", "nonfp8", "mixed")


def recompute_steps(scenario: str, reentrant: bool, device: torch.device, steps: int = 2) -> dict[str, Any]:
    """``steps`` training steps (SGD) of ``te.checkpoint(body, x, use_reentrant=reentrant)`` whose
    ``body`` is ``scenario`` (:data:`RECOMPUTE_SCENARIOS`), on ``device`` (under its platform's
    :meth:`Platform.active`). The result: ``error`` (the exception, or None) and its traceback,
    ``events``, ``stash_key`` (each layer has a recompute stash), the FP8 layer's
    ``fp8_forward_scales`` and ``fp8_recompute_scales``, and ``body_states`` (FP8 outside the
    autocast, inside it, recompute phase: per call of the body)."""
    import torch
    import transformer_engine.pytorch as te
    import transformer_engine.pytorch.distributed as dist
    import transformer_engine.pytorch.module.base as base

    dist.FP8GlobalStateManager.reset()
    dist.activation_recompute_forward._is_first_fp8_module.clear()
    events: list[Any] = []
    layer = delayed_scaling_layer()
    fp8_layer, plain_layer = layer("fp8", events, device), layer("plain", events, device)
    params = [fp8_layer.weight, plain_layer.weight]

    def body(x: torch.Tensor) -> torch.Tensor:
        outside = dist.FP8GlobalStateManager.is_fp8_enabled()
        if scenario == "nonfp8":
            return plain_layer(x)  # type: ignore[no-any-return]
        with fp8_autocast():
            inside = dist.FP8GlobalStateManager.is_fp8_enabled()
            events.append({"body": [outside, inside, base.in_fp8_activation_recompute_phase()]})
            y = fp8_layer(x)
        return plain_layer(y) if scenario == "mixed" else y  # type: ignore[no-any-return]

    result: dict[str, Any] = {"error": None}
    try:
        for step in range(steps):
            x = torch.full((4, 8), 0.5 * (step + 1), device=device, requires_grad=True)
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
        result["traceback"] = traceback.format_exc()  # the text Python prints (the signature tests)
    result["events"] = events
    result["stash_key"] = {"fp8": STASH_KEY in fp8_layer.fp8_meta, "plain": STASH_KEY in plain_layer.fp8_meta}
    fp8_runs = [e for e in events if e.get("layer") == "fp8" and e["fp8"]]
    result["fp8_forward_scales"] = [e["scale"] for e in fp8_runs if not e["phase"]]
    result["fp8_recompute_scales"] = [e["scale"] for e in fp8_runs if e["phase"]]
    result["body_states"] = [e["body"] for e in events if "body" in e]
    return result


def fp8_recompute() -> Outcome:
    """fp8-recompute's reproduction (TE PR #3284): :func:`recompute_steps` ``inner``, non-reentrant:
    two training steps of ``te.checkpoint`` around a callable that opens its own delayed-scaling FP8
    autocast (FP8 off where the checkpoint is entered). The bug observed where the recompute raises
    TE's stash ``KeyError`` (TE 1.13-2.18; the measure: the exception), or recomputes with another FP8
    scale than its forward's (the measure: both scales); not observed where each recompute used its
    forward's scale. Another failure means the reproduction broke."""
    where = platform()
    if isinstance(where, str):
        return cannot_run(where)
    case = (
        "2 training steps of te.checkpoint(use_reentrant=False) around a callable that opens its own "
        "delayed-scaling FP8 autocast"
    )
    with where.active():
        why = _fp8_unavailable()
        if why:
            return cannot_run(why)
        r = recompute_steps("inner", reentrant=False, device=where.device)
    if r["error"]:
        if r["error"] != NO_STASH:
            raise RuntimeError(f"failed otherwise than the bug: {r['error']}\n{r['traceback']}")
        return observed(f"{r['error']} in the first recompute", case)
    forward, recompute = r["fp8_forward_scales"], r["fp8_recompute_scales"]
    if len(forward) != 2:
        raise RuntimeError(f"the FP8 layer ran under FP8 in {len(forward)} forwards of 2: {r['events']}")
    compared = f"the recomputes' FP8 scales {recompute} against their forwards' {forward}"
    return not_observed(compared, case) if recompute == forward else observed(compared, case)


# -- fp8-recompute-pairing (TE PR #3394): stashes paired per module ---------------------------------------


@functools.cache
def te_layer() -> type:
    """The class of a real ``TransformerEngineBaseModule`` (TE 2.18+): TE's own ``prepare_forward`` /
    ``end_forward`` (the stash condition PR #3394 changes) around a 16x16 fp32 matmul scaled by the
    FP8 scale it would quantize with; it records the input amax as the cast kernel does, and builds
    its delayed-scaling state with :func:`recipe_state`. Made with a name, the list its forwards
    append an event to (layer, FP8 on, recompute phase, training, scale), a weight seed and the
    :class:`Platform`."""
    import torch
    import transformer_engine.pytorch.module.base as base

    class FP8BookkeepingLinear(base.TransformerEngineBaseModule):
        def __init__(self, name: str, events: list[Any], seed: int, where: Platform) -> None:
            with where.constructing():
                super().__init__()
            self.tag = name
            self.events = events
            self.where = where
            g = torch.Generator().manual_seed(seed)
            self.weight = torch.nn.Parameter((torch.eye(16) + 0.05 * torch.randn(16, 16, generator=g)).to(where.device))

        def _get_weight_tensors(self) -> list[torch.Tensor]:
            return [self.weight]

        def _get_weight_quantizers(self) -> list[Any]:
            return [None]

        def set_meta_tensor(self, fwd: bool, recipe: Any) -> None:
            key = "scaling_fwd" if fwd else "scaling_bwd"
            self.fp8_meta[key] = recipe_state(recipe, fwd, self.where.device)
            self.quantizers[key] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            phase = base.in_fp8_activation_recompute_phase()
            self.prepare_forward(self.where.module_input(x))
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

    return FP8BookkeepingLinear


def _te_state() -> tuple[Any, Any]:
    import transformer_engine.pytorch.distributed as dist

    return dist.FP8GlobalStateManager, dist.activation_recompute_forward


def new_layers(result: dict[str, Any], where: Platform, **seeds: int) -> list[Any]:
    """New :func:`te_layer` modules (name -> weight seed) appending to ``result["events"]``; a
    :func:`pairing_scenario` reads their stash facts at its end."""
    events = result.setdefault("events", [])
    result["layers"] = {name: te_layer()(name, events, seed, where) for name, seed in seeds.items()}
    return list(result["layers"].values())


def random_input(where: Platform, seed: int, requires_grad: bool = False) -> torch.Tensor:
    """A seeded 16x16 normal input on the platform's device (drawn on the CPU: the same numbers everywhere)."""
    import torch

    x = torch.randn(16, 16, generator=torch.Generator().manual_seed(seed)).to(where.device)
    return x.requires_grad_(requires_grad)


def finite_grad(tensor: torch.Tensor) -> bool:
    import torch

    return tensor.grad is not None and bool(torch.isfinite(tensor.grad).all())


def stash_facts(result: dict[str, Any], layers: dict[str, Any]) -> None:
    """What upstream's ``_assert_fp8_recompute_state_drained`` and its leak tests look at, into
    ``result``: ``buffer_lens`` (stashes left per module), ``first_module_entries``, and per layer
    ``stash_key``, ``stash_len``, ``restored`` (its live scale back after the recompute), ``grad``
    (its weight's gradient finite; None: no gradient)."""
    import torch

    manager, arf = _te_state()
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


def pairing_scenario(body: Callable[Concatenate[dict[str, Any], P], None]) -> Callable[P, dict[str, Any]]:
    """Make ``body(result, *args, **kwargs)`` a scenario: TE's FP8 state reset first, the exception it
    raises recorded as the result's ``error`` (the unpatched failure is the result) with its
    traceback, then the :func:`stash_facts` of the layers it made with :func:`new_layers`."""

    @functools.wraps(body)
    def run(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        manager, arf = _te_state()
        manager.reset()
        arf._is_first_fp8_module.clear()
        result: dict[str, Any] = {"error": None, "observed": []}
        try:
            body(result, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the unpatched failure is the result
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
            result["traceback"] = traceback.format_exc()  # the text Python prints (the signature tests)
        stash_facts(result, result.pop("layers", {}))
        result.pop("events", None)
        return result

    return run


@pairing_scenario
def eval_module(
    result: dict[str, Any], where: Platform, use_reentrant: bool, recompute_training: bool, inner_autocast: bool = True
) -> None:
    """Upstream's ``test_checkpoint_eval_module_balances_fp8_recompute_state``: a module in ``eval()``
    under ``te.checkpoint`` with delayed-scaling FP8, put in ``train(recompute_training)`` before the
    backward. ``inner_autocast``: the checkpointed callable opens the FP8 autocast, as upstream's test
    does; else the autocast is opened around ``te.checkpoint``, as a training loop does."""
    import transformer_engine.pytorch as te

    (layer,) = new_layers(result, where, layer=1)
    layer.eval()

    def fn(value: torch.Tensor) -> torch.Tensor:
        with fp8_autocast() if inner_autocast else contextlib.nullcontext():
            return layer(value * 2)  # type: ignore[no-any-return]

    inp = random_input(where, 0, requires_grad=True)
    with contextlib.nullcontext() if inner_autocast else fp8_autocast():
        loss = te.checkpoint(fn, inp, use_reentrant=use_reentrant).float().sum()
    layer.train(recompute_training)
    loss.backward()
    result["inp_grad"] = finite_grad(inp)


def fp8_recompute_pairing() -> Outcome:
    """fp8-recompute-pairing's reproduction (TE PR #3394): :func:`eval_module`, non-reentrant, the
    module put in ``train()`` before the backward, the FP8 autocast opened around ``te.checkpoint``
    (so that fp8-recompute's bug, which needs the autocast inside, plays no part: this reproduction
    shows the pairing bug alone, on any TE of its range). The bug observed where the recompute
    raises TE's stash error (the measure: the exception) or leaves the stash unbalanced (the
    measure: the stash facts); not observed where the module stashed in its forward, the recompute
    consumed it and restored the live scale, and the gradients are finite. Another failure means
    the reproduction broke."""
    where = platform()
    if isinstance(where, str):
        return cannot_run(where)
    case = (
        "a TE module in eval() under te.checkpoint(use_reentrant=False), delayed-scaling FP8 autocast around "
        "the checkpoint, put in train() before the backward"
    )
    with where.active():
        why = _fp8_unavailable()
        if why:
            return cannot_run(why)
        r = eval_module(where, use_reentrant=False, recompute_training=True, inner_autocast=False)
    if r["error"]:
        if not r["error"].startswith((NO_STASH, EMPTY_STASH)):
            raise RuntimeError(f"failed otherwise than the bug: {r['error']}\n{r['traceback']}")
        return observed(f"{r['error']} in the recompute", case)
    layer = r["layer"]
    drained = r["buffer_lens"] == [0] and layer["stash_key"] and layer["stash_len"] == 0 and layer["restored"]
    finite = bool(r["inp_grad"] and layer["grad"])
    facts = (
        f"the module's recompute stashes left {r['buffer_lens']}, made in its forward: {layer['stash_key']}, "
        f"live scale restored after the recompute: {layer['restored']}, gradients finite: {finite}"
    )
    return not_observed(facts, case) if drained and finite else observed(facts, case)
