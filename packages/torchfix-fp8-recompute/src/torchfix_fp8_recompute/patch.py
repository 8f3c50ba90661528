"""Backport of TransformerEngine PR #3284 (TE 2.19.0) to TE 1.13-2.18.

The bug (``transformer_engine/pytorch/distributed.py``, TE 1.13-2.18)::

    class activation_recompute_forward:
        def __enter__(self):
            _FP8_ACTIVATION_RECOMPUTE_ENABLED = self.activation_recompute and FP8GlobalStateManager.is_fp8_enabled()
    def is_fp8_activation_recompute_enabled():
        return _FP8_ACTIVATION_RECOMPUTE_ENABLED

FP8 is sampled when the checkpoint region is entered. A checkpointed callable that opens its own
``te.autocast`` / ``fp8_autocast`` enters with FP8 off, so its delayed-scaling modules skip
``copy_forward_fp8_meta_tensors_for_recompute`` in the forward; the recompute (FP8 on, recompute
phase) then calls ``get_old_fp8_meta_tensors_for_recompute`` and raises
``KeyError: 'global_fp8_buffer_pos_fwd_recompute'``, or pops a stash left by an earlier step
(stale scale/amax history, silent).

The fix, as upstream: the region flag is set from ``self.activation_recompute`` alone, and the
getter answers ``region and FP8GlobalStateManager.is_fp8_enabled()`` at query time. Two patches:

1. ``activation_recompute_forward.__enter__`` is wrapped on the class: the original runs first (it
   keeps TE's ``is_first_fp8_module`` bookkeeping), then ``_FP8_ACTIVATION_RECOMPUTE_ENABLED`` is
   set to the region flag. ``__exit__`` already resets it to False.
2. ``is_fp8_activation_recompute_enabled`` gets a new code object (``PatchSet.swap_code``). The
   function is imported by name into ``module/base.py``, ``linear.py``, ``grouped_linear.py``,
   ``layernorm_linear.py``, ``layernorm_mlp.py`` before any late patch could run; changing the code of
   the one function object reaches every such binding, and any outside TE. The new code has no free
   variables and reads only the globals ``_FP8_ACTIVATION_RECOMPUTE_ENABLED`` and
   ``FP8GlobalStateManager`` of ``distributed.py``, which the probe checks.

Counting (``torchfix_core.report()``, event ``kept-recompute-state``): once per checkpoint region
entered where the fix changes TE's answer, i.e. TE's own ``__enter__`` sampled "FP8 off" (the
callable opens its own FP8 autocast) and the region flag is set to True instead; a region entered
with FP8 on is not counted. One dict increment at region entry, nothing on the getter's path.

Hazards: a TE build that renames those globals without the upstream fix is refused by the probe
(nothing patched). Code reading ``_FP8_ACTIVATION_RECOMPUTE_ENABLED`` directly (none in TE
1.13-2.18) would see the region flag, as upstream's ``_IN_ACTIVATION_RECOMPUTE_REGION``. The flags
are plain module globals, as in TE, shared by all threads (autograd worker threads included).
Stash pairing per module (TE PR #3394) is the separate fix ``fp8-recompute-pairing``
(``pairing.py``); not addressed: TE PR #3213.

Upstream: https://github.com/NVIDIA/TransformerEngine/pull/3284
"""

from __future__ import annotations

import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

ACTED, log = tally_and_log("fp8-recompute", "kept-recompute-state")
COUNTS = ACTED.counts

MODULE = "transformer_engine.pytorch.distributed"
#: The global TE 2.19+ defines (TE PR #3284); its presence means the fix is already upstream.
UPSTREAM_MARKER = "_IN_ACTIVATION_RECOMPUTE_REGION"
REGION_FLAG = "_FP8_ACTIVATION_RECOMPUTE_ENABLED"
PHASE_FLAG = "_FP8_ACTIVATION_RECOMPUTE_PHASE"
GETTER = "is_fp8_activation_recompute_enabled"
CONTEXT = "activation_recompute_forward"


def _fixed_getter() -> bool:
    """Whether we are in an activation recompute region with FP8 currently enabled.

    Template of the replacement code object: it runs with the globals of TE's ``distributed.py``
    (the patched function keeps its ``__globals__``), so the names below are TE's.
    """
    return _FP8_ACTIVATION_RECOMPUTE_ENABLED and FP8GlobalStateManager.is_fp8_enabled()  # type: ignore[name-defined]  # noqa: F821


def _fixed_code(original: types.CodeType) -> types.CodeType:
    """The template's code, renamed to the original (tracebacks and profilers show TE's name)."""
    names: dict[str, Any] = {"co_name": original.co_name}
    if hasattr(original, "co_qualname"):  # Python 3.11+
        names["co_qualname"] = original.co_qualname
    return _fixed_getter.__code__.replace(**names)


def _distributed() -> types.ModuleType:
    return imported_module(MODULE)


def _check_layout(dist: types.ModuleType) -> None:
    """Raise PatchRefused unless ``dist`` has the TE 1.13-2.18 layout the patch was written for."""
    for name in (REGION_FLAG, PHASE_FLAG, GETTER, CONTEXT, "FP8GlobalStateManager"):
        if not hasattr(dist, name):
            raise PatchRefused(f"{MODULE}.{name} does not exist (unknown TE layout)")
    manager = dist.FP8GlobalStateManager
    if not callable(getattr(manager, "is_fp8_enabled", None)):
        raise PatchRefused(f"{MODULE}.FP8GlobalStateManager.is_fp8_enabled is missing")
    getter = getattr(dist, GETTER)
    if not isinstance(getter, types.FunctionType):
        raise PatchRefused(f"{MODULE}.{GETTER} is a {type(getter).__name__}, expected a function")
    code = getter.__code__
    if code.co_freevars or code.co_argcount or set(code.co_names) != {REGION_FLAG}:
        raise PatchRefused(
            f"{MODULE}.{GETTER} does not simply return {REGION_FLAG} (reads {code.co_names}); unknown TE layout"
        )
    if getter.__globals__ is not vars(dist):
        raise PatchRefused(f"{MODULE}.{GETTER} is not defined in {MODULE}")
    cls = getattr(dist, CONTEXT)
    enter = cls.__dict__.get("__enter__") if isinstance(cls, type) else None
    if not isinstance(enter, types.FunctionType):
        raise PatchRefused(f"{MODULE}.{CONTEXT}.__enter__ is not a function defined on the class")
    if REGION_FLAG not in enter.__code__.co_names:
        raise PatchRefused(f"{MODULE}.{CONTEXT}.__enter__ does not set {REGION_FLAG}; unknown TE layout")


class Fp8RecomputeFix(Fix):
    """Region flag at checkpoint entry, FP8 gate at query time (TE PR #3284)."""

    def probe(self) -> ProbeResult:
        dist = _distributed()
        if hasattr(dist, UPSTREAM_MARKER):
            return ProbeResult(
                False, f"{MODULE} has {UPSTREAM_MARKER}: TE carries the upstream fix (PR #3284, TE 2.19+)"
            )
        getter = getattr(dist, GETTER, None)
        if isinstance(getter, types.FunctionType) and getter.__code__.co_names == _fixed_getter.__code__.co_names:
            # Our code is already in place (a copy of this fix in another PatchSet): nothing to do.
            return ProbeResult(False, f"{MODULE}.{GETTER} already gates on the current FP8 state")
        _check_layout(dist)
        return ProbeResult(
            True,
            f"{MODULE} samples FP8 at checkpoint entry ({CONTEXT}.__enter__ sets {REGION_FLAG} = "
            "activation_recompute and is_fp8_enabled()); an inner FP8 autocast loses the recompute stash",
        )

    def apply(self) -> None:
        dist = _distributed()
        _check_layout(dist)
        getter = getattr(dist, GETTER)
        cls = getattr(dist, CONTEXT)

        def make_enter(original: Callable[..., Any]) -> Callable[..., Any]:
            def __enter__(self: Any) -> Any:
                result = original(self)
                # Upstream: _IN_ACTIVATION_RECOMPUTE_REGION = self.activation_recompute
                if self.activation_recompute and not getattr(dist, REGION_FLAG):
                    COUNTS["kept-recompute-state"] += 1  # TE sampled FP8 off: the fix keeps the region
                setattr(dist, REGION_FLAG, bool(self.activation_recompute))
                return result

            return __enter__

        self.patches.wrap(cls, "__enter__", make_enter, signature=("self",))
        self.patches.swap_code(getter, _fixed_code(getter.__code__), signature=())
        log.debug("patched %s.%s.__enter__ and %s.%s.__code__", MODULE, CONTEXT, MODULE, GETTER)
