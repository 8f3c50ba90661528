"""The fix ``aot-autocast-key``: the AOTAutograd cache key also covers the ambient autocast state.

The bug
    ``AOTAutogradCacheDetails.__init__`` (``torch/_functorch/_aot_autograd/autograd_cache.py``: torch
    2.8 line 300, 2.9.1 line 328, 2.10 line 332, 2.11 line 447, 2.12 line 453) records only
    ``disable_amp = torch._C._is_any_autocast_enabled()`` (lines 310, 338, 342, 457, 463), a bool. AOTAutograd traces the graph under
    the ambient autocast mode, so the casts of ``torch.autocast(..., dtype=...)`` are baked into the
    compiled artifact, but the dtype is not in the key. A function compiled under
    ``torch.autocast("cpu", dtype=torch.bfloat16)`` and later run under ``dtype=torch.float16``
    (Dynamo recompiles on the changed autocast state, or a later process with the same
    ``TORCHINDUCTOR_CACHE_DIR``) gets the bfloat16 artifact from the AOTAutograd cache: outputs of the
    wrong dtype and values, no error. The FX graph cache alone is not affected (its key is the graph
    after AOTAutograd, which holds the casts); the AOTAutograd key is the one that skips that graph.

The patch (mirrors pytorch/pytorch#181564, torch 2.13, in the shape torch 2.15 records)
    ``AOTAutogradCacheDetails.__init__`` is wrapped: after torch's own ``__init__`` the details gain
    ``autocast_state = {device: (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))}``
    for every device of ``torch._C._autocast_supported_devices()`` (torch 2.10+; on 2.8/2.9, which lack
    it, the same fixed list of device types, each one skipped where torch rejects it). torch 2.15 keys
    exactly this (enabled, dtype) pair per device; torch 2.13/2.14 key the dtype of the enabled
    devices only. The details object is what the key hashes (``AOTAutogradCachePickler.get_hash``), so
    the new attribute enters every key.

Why it can only add misses
    The attribute is added to the object that is hashed, nothing is removed: two graphs whose keys
    differed before still differ; two whose keys were equal stay equal exactly when their autocast
    states are equal. Its values are plain ``str``, ``bool`` and ``torch.dtype`` (pickled by name,
    ``torch.bfloat16``), in the device order torch lists, so the key is the same in every process of
    one build. Keys differ from an unpatched torch's, so entries saved without the fix are not reached
    (one cold miss per graph), and a process with the fix never loads them.

Probe (live objects, no version check)
    The key of one small ATen graph is computed twice, under ``torch.autocast("cpu",
    dtype=torch.bfloat16)`` and ``dtype=torch.float16``, through the live ``AOTAutogradCacheDetails``
    and ``AOTAutogradCachePickler``. Equal keys: the bug (``needed``). Different keys: torch keys the
    dtype itself (2.13+: ``not-needed``). The key cannot be computed, or ``__init__`` has another
    leading signature than ``(self, gm, example_inputs, aot_config, fx_config)`` -> ``PatchRefused``.

Hazards
    Keys change once for every graph (a cold AOTAutograd cache after installing the fix). Changing an
    autocast default dtype with autocast off (``torch.set_autocast_dtype``) also changes the key, as on
    torch 2.15. Composes with ``aot-bypass-key`` and ``aot-hop-body-key`` (other attributes of the
    same module) in any order.

Upstream: pytorch/pytorch#181564 (torch 2.13), #191110 (enabled and dtype of every device, torch 2.15).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

#: ``key-changed``: an AOTAutograd key was computed with the autocast state added (every key, once
#: per compile or cache lookup); ``autocast-dtype-keyed``: of those, autocast was on, so the key now
#: names the autocast dtype that torch's key left out (the case the bug serves a wrong artifact in)
ACTED, log = tally_and_log("aot-autocast-key", "key-changed", "autocast-dtype-keyed")
COUNTS = ACTED.counts

MODULE = "torch._functorch._aot_autograd.autograd_cache"
CLASS = "AOTAutogradCacheDetails"
ATTRIBUTE = "autocast_state"
#: the leading parameters of ``AOTAutogradCacheDetails.__init__`` on every release the fix targets
PARAMETERS = ("self", "gm", "example_inputs", "aot_config", "fx_config")
#: ``torch._C._autocast_supported_devices()`` of torch 2.10-2.15, for the releases that lack it
DEVICE_TYPES = ("cpu", "cuda", "mtia", "maia", "xpu", "ipu", "hpu", "xla", "privateuseone", "mps")


def _module() -> types.ModuleType:
    return imported_module(MODULE)


def autocast_state() -> dict[str, tuple[bool, Any]]:
    """``{device_type: (enabled, dtype)}`` of the ambient autocast mode, every supported device type,
    in torch's order (torch 2.15's ``autocast_state``). A device type torch rejects is left out."""
    import torch

    supported = getattr(torch._C, "_autocast_supported_devices", None)
    devices = tuple(supported()) if callable(supported) else DEVICE_TYPES
    state: dict[str, tuple[bool, Any]] = {}
    for device in devices:
        try:
            state[str(device)] = (bool(torch.is_autocast_enabled(device)), torch.get_autocast_dtype(device))
        except (RuntimeError, TypeError, ValueError):  # not an autocast device type on this build
            continue
    return state


def _keyed_init(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if ATTRIBUTE not in vars(self):  # torch's own record (2.13+) wins
            state = autocast_state()
            setattr(self, ATTRIBUTE, state)
            COUNTS["key-changed"] += 1
            if any(enabled for enabled, _ in state.values()):
                COUNTS["autocast-dtype-keyed"] += 1

    return __init__


def probe_graph() -> Any:
    """``GraphModule`` ``x -> aten.mm(x, x)``: keyable on every release."""
    import torch

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.mm.default, (x, x)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def key_under_autocast(dtype: Any, module: types.ModuleType | None = None) -> str:
    """The AOTAutograd key of :func:`probe_graph` computed under ``torch.autocast("cpu", dtype=dtype)``
    with the live details and pickler classes (inside a tracing context with a shape env, as during a
    compile). Raises :class:`PatchRefused` when it cannot be computed."""
    import torch
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    module = _module() if module is None else module
    gm = probe_graph()
    try:
        with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))), torch.autocast("cpu", dtype=dtype):
            details = getattr(module, CLASS)(gm, [], None, {})
        return "a" + str(module.AOTAutogradCachePickler(gm).get_hash(details))  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - not the layout the fix was written for
        raise PatchRefused(f"{MODULE}: the key of a plain graph cannot be computed: {exc!r}") from None


class AotAutocastKeyFix(Fix):
    """Wraps ``AOTAutogradCacheDetails.__init__`` to record the autocast state (see the module doc)."""

    def probe(self) -> ProbeResult:
        import torch
        from torchfix_core.probes import isolated

        module = _module()
        self._check_layout(module)
        bf16, fp16 = isolated(lambda: (key_under_autocast(torch.bfloat16), key_under_autocast(torch.float16)))
        if bf16 != fp16:
            return ProbeResult(False, f"{CLASS} keys the autocast dtype already (bfloat16 and float16 keys differ)")
        return ProbeResult(
            True,
            f"{CLASS} keys only whether autocast is on ({bf16[:12]}... under bfloat16 and float16): "
            "a graph compiled under one autocast dtype is reused under another",
        )

    @staticmethod
    def _check_layout(module: types.ModuleType) -> None:
        from torchfix_core.probes import method_parameters

        details = getattr(module, CLASS, None)
        params = method_parameters(details, "__init__")
        if params is None or params[: len(PARAMETERS)] != PARAMETERS:
            raise PatchRefused(f"{MODULE}.{CLASS}.__init__ has parameters {params}, expected {PARAMETERS}...")
        if not hasattr(module, "AOTAutogradCachePickler"):
            raise PatchRefused(f"{MODULE}.AOTAutogradCachePickler does not exist: unknown layout")

    def apply(self) -> None:
        module = _module()
        self._check_layout(module)
        self.patches.wrap(getattr(module, CLASS), "__init__", _keyed_init)
        log.debug("aot-autocast-key: %s.%s now records %s", MODULE, CLASS, ATTRIBUTE)
