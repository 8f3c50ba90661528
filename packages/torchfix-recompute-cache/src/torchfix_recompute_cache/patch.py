"""The fix: activation checkpoint recompute of compiled code runs the graph the forward ran.

The bug (pytorch/pytorch#166926, open)
    Dynamo keeps one list of cache entries (compiled graphs, each with its guards) per code object
    and runs the first entry whose guards pass. On every hit it moves that entry to the front, and it
    puts a new entry at the front (``lookup()`` / ``create_cache_entry()`` in
    ``torch/csrc/dynamo/extra_state.cpp``). When two entries accept the same inputs (typically the
    static graph ``0/0`` and the dynamic graph ``0/1`` that automatic dynamic shapes compiled for a
    second shape), which one runs depends on what ran last. Non-reentrant activation checkpointing
    (``checkpoint(fn, use_reentrant=False)``, ``checkpoint_wrapper``, SAC) runs ``fn`` again in
    backward and expects the same saved tensors; if a compiled call inside ``fn`` now picks the other
    graph, the recompute saves other tensors and checkpoint raises ``CheckpointError`` ("Recomputed
    values for the following tensors have different metadata", or "trying to save more tensors
    during recomputation"). With SAC the replay misses its storage. Example: blocks 1 and 2 call
    one compiled function with 4 and 6 rows; block 2 recompiles it dynamic; the recompute of block 1
    then hits the dynamic graph first.

Upstream's mechanism and this fix
    pytorch PR #167038 (torch 2.10) added ``torch._C._dynamo.eval_frame._set_lru_cache(bool)``: with
    ``False`` a hit no longer moves the entry and new entries are appended, so lookups go in
    insertion order and the same inputs always pick the same graph. torchtitan calls it with
    ``False`` when it applies activation checkpointing (PR #1991, then PR #2204 "whenever AC is
    applied"). This fix does the same, automatically: the first time a non-reentrant checkpoint
    builds its forward saved-tensor hook (``_checkpoint_hook.__init__``, wrapped), it calls
    ``_set_lru_cache(False)``, before any compiled code of that region runs. From then on it stays
    off (process-wide) until the fix is reverted. A process that never checkpoints keeps LRU.

    Why not only while a checkpoint forward or recompute is in flight: the order must stay fixed
    for the whole time between a region's forward and its recompute, and compiled code runs outside
    checkpoint regions in that time (uncheckpointed layers, the loss, other regions). One hit there
    with LRU on reorders the list: measured, a checkpointed block then an uncheckpointed call with a
    new shape still fails with the switch off only inside the regions (docs/fixes/recompute-cache.md).

    What turning LRU off costs: a hit on the k-th entry evaluates the guards of the k-1 entries before
    it on every call (0.6-0.8 us each on a 2-core CPU VM, benchmarks/recompute_cache_overhead.py),
    bounded by the recompile limit (8 entries by default). The number of compiles does not change.

Staying out of the way
    ``_set_lru_cache`` is replaced by a thin recorder (same arguments and return value). Once the
    program has set the switch itself (True or False, e.g. torchtitan's call), the fix never touches
    it again. On torch 2.15 the switch reports its previous value, so the probe reads it: already
    off means ``not-needed``. ``TORCHFIX_RECOMPUTE_CACHE_ALWAYS=1`` turns it off at apply (for
    recompute schemes that do not use ``torch.utils.checkpoint``). ``use_reentrant=True`` is not
    covered: it builds no ``_checkpoint_hook`` and does not compare saved tensors, so a different
    graph there does not raise.

Hazards
    A program that bound ``_set_lru_cache`` by ``from torch._C._dynamo.eval_frame import
    _set_lru_cache`` before the fix applied bypasses the recorder. On torch 2.10-2.14 a setting made
    before the fix applied (with ``TORCHFIX_AUTOLOAD=0`` and a late ``apply()``) cannot be read; the
    fix then assumes torch's default (on). Revert switches LRU back on only if the fix turned it off
    and the program has not set it since.

Patch points: ``torch/utils/checkpoint.py::_checkpoint_hook.__init__(self, frame)`` (2.10.0 :1143,
2.11.0 :1143, 2.12.0 :1138, 2.13.0 :1154, 2.14.1 :1340, 2.15.0 :1340) and the attribute
``torch._C._dynamo.eval_frame._set_lru_cache``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import require_parameters
from torchfix_core.tallies import tally_and_log

from torchfix_recompute_cache import probes
from torchfix_recompute_cache.package import ALWAYS

#: What ``torchfix_core.report()`` counts for this fix: ``lru-turned-off`` (detail: what made the fix
#: turn it off), once per process at most, in :meth:`LruSwitch.turn_off`. Not counted: the program
#: setting the switch itself, a process that never checkpoints.
ACTED, log = tally_and_log("recompute-cache", "lru-turned-off")


class LruSwitch:
    """The one owner of what this fix knows about Dynamo's LRU switch in this process.

    ``settled`` becomes True once nothing is left to do (the fix turned LRU off, or the program set
    the switch itself); the checkpoint wrapper reads only that attribute on its hot path.
    """

    __slots__ = ("_lock", "_set", "program_value", "settled", "turned_off_by")

    def __init__(self, set_lru_cache: Callable[[bool], Any]) -> None:
        self._lock = threading.Lock()
        self._set = set_lru_cache  # torch's own builtin, never the recorder
        self.program_value: bool | None = None  # last value the program passed to _set_lru_cache
        self.turned_off_by = ""  # what made this fix turn LRU off ("" = not turned off)
        self.settled = False

    def turn_off(self, why: str) -> None:
        """Turn Dynamo's LRU reordering off unless already done or the program chose a value."""
        with self._lock:
            if self.settled:
                return
            self._set(False)
            self.turned_off_by = why
            self.settled = True
        ACTED.note("lru-turned-off", why)
        log.info("torchfix recompute-cache: Dynamo LRU cache reordering turned off (%s); pytorch#166926", why)

    def record(self, enabled: Any) -> Any:
        """Body of the replacement ``_set_lru_cache``: torch's call, then remember the program's choice."""
        result = self._set(enabled)
        with self._lock:
            self.program_value = bool(enabled)
            self.settled = True
        return result

    def restore(self) -> None:
        """On revert: switch LRU back on if this fix turned it off and the program has not set it since."""
        with self._lock:
            if self.turned_off_by and self.program_value is None:
                self._set(True)
            self.turned_off_by = ""
            self.settled = True  # a reverted fix's wrappers (if still referenced) do nothing

    def note(self) -> str:
        if self.program_value is not None:
            return f"left to the program: it called _set_lru_cache({self.program_value})"
        if self.turned_off_by:
            return f"Dynamo LRU reordering off since {self.turned_off_by}"
        return "Dynamo LRU reordering still on: no non-reentrant checkpoint forward yet"


class RecomputeCacheFix(Fix):
    """Turn Dynamo's LRU cache reordering off once non-reentrant activation checkpointing is in use."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self.switch: LruSwitch | None = None

    def probe(self) -> ProbeResult:
        fn = probes.lru_switch()
        if fn is None:
            raise PatchRefused(
                "torch._C._dynamo.eval_frame._set_lru_cache does not exist (it came with pytorch PR #167038, "
                "torch 2.10): no switch to keep Dynamo's cache order with"
            )
        import torch.utils.checkpoint as ckpt

        where = "torch.utils.checkpoint._checkpoint_hook.__init__"
        require_parameters(getattr(ckpt, "_checkpoint_hook", None), "__init__", probes.HOOK_INIT_SIGNATURE, where=where)
        state = probes.reported_lru_state(fn)
        if state is False:
            return ProbeResult(
                False,
                "Dynamo's LRU cache reordering is already off (_set_lru_cache reports False): a recompute picks "
                "the forward's graph",
            )
        how = "reported by _set_lru_cache" if state else "torch's default; this torch's switch does not report it"
        return ProbeResult(
            True,
            f"Dynamo moves a cache entry to the front on every hit (LRU on: {how}), so a checkpoint recompute can "
            "run another compiled graph than its forward",
        )

    def apply(self) -> None:
        import torch.utils.checkpoint as ckpt

        module = probes.eval_frame_module()
        original = probes.lru_switch()
        if module is None or original is None:
            raise PatchRefused("torch._C._dynamo.eval_frame._set_lru_cache does not exist")
        switch = LruSwitch(original)

        def _set_lru_cache(enabled: Any) -> Any:
            return switch.record(enabled)

        _set_lru_cache.__doc__ = original.__doc__
        setattr(_set_lru_cache, "__wrapped__", original)

        def make_hook_init(init: Callable[..., Any]) -> Callable[..., Any]:
            def __init__(self: Any, frame: Any) -> None:
                if not switch.settled:
                    switch.turn_off("the first non-reentrant activation checkpoint")
                init(self, frame)

            return __init__

        self.patches.replace(
            module, "_set_lru_cache", _set_lru_cache, check=lambda raw: None if callable(raw) else "not callable"
        )
        self.patches.wrap(ckpt._checkpoint_hook, "__init__", make_hook_init, signature=probes.HOOK_INIT_SIGNATURE)
        self.switch = switch
        if ALWAYS.is_on():
            switch.turn_off(f"the fix was applied ({ALWAYS.name}=1)")
        elif probes.checkpoint_forward_in_flight():
            switch.turn_off("the fix was applied inside a checkpoint forward")

    def runtime_note(self) -> str:
        return self.switch.note() if self.switch is not None else ""

    def revert(self) -> list[str]:
        problems = super().revert()
        if self.switch is not None:
            self.switch.restore()
            self.switch = None
        return problems
