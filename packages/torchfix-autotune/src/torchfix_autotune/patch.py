"""Implementation of the ``autotune`` fix: wrap three ``CachingAutotuner`` methods in the mode filter.

The bug: ``CachingAutotuner`` (``torch/_inductor/runtime/triton_heuristics.py``) tunes a Triton
kernel lazily at its **first launch**. ``run()`` -> ``autotune_to_one_config`` ->
``benchmark_all_configs`` -> ``bench`` (and ``coordinate_descent_tuning`` -> ``bench``) clone the
arguments (``aten.as_strided``/``aten.clone``), zero them (``aten.zero_``) and allocate the L2-flush
buffer (``aten.empty.memory_format``) through the dispatcher. A compiled artifact runs under the
dispatch modes of the caller, so when that first launch happens inside selective activation
checkpointing (SAC) these ops reach SAC's modes. Since torch 2.13 SAC's replay is strict and
recompute fails with ``aten.empty.memory_format encountered during backward but not found in
storage``; in the forward, SAC's recording mode stores the benchmark outputs (quack#204 saw 25 GiB
retained by another autotuner under SAC).

The fix: each of the three methods runs inside
:func:`torchfix_autotune.modes.without_compile_internal_modes`, which hides the current thread's
user dispatch modes that declare ``ignore_compile_internals()`` (SAC's modes, ``DebugMode``) and
restores the exact stack afterwards, also on exceptions. Autotuning still runs in full.

Hazards: see :mod:`torchfix_autotune.modes`. The fix removes the crash, not a numerical divergence
between forward and recompute when recompute picks other kernel configs (pytorch#186572); pair it
with ``torchfix-sac-replay``. Other allocation sites outside the three methods (``run()``'s Triton
allocator, ``_combo_sequential_autotune`` beyond its ``bench`` calls) are not covered.

Report (``torchfix_core.report()``, :data:`ACTED`): ``hid-modes`` counts each call of a wrapped
method that ran with at least one mode hidden (SAC's recording or replay mode, ``DebugMode``), with
the kernel's name (``inductor_meta["kernel_name"]``) as the detail; a call that finds nothing to
hide is not counted. It runs once per kernel tuning, never per launch.

Upstream: not fixed in torch <= 2.15.0; strict replay came with
https://github.com/pytorch/pytorch/pull/176455. A prime-rl backport wraps the same three methods
for torch 2.13.0 only; this fix is gated by :mod:`torchfix_autotune.probes` instead.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from typing import Any, Callable

from torchfix_core import Fix, ProbeResult
from torchfix_core.tallies import tally

from torchfix_autotune import probes

#: What the fix did in this process (``torchfix_core.report()``); declared at 0 on import.
ACTED = tally("autotune", "hid-modes")

#: Per-process counters, updated by the installed wrappers (cheap: they run once per kernel tuning).
#: ``calls[name]``: calls of each wrapped method; ``filtered[name]``: calls that hid at least one
#: mode; ``hidden[type name]``: how often each mode type was hidden.
STATS: dict[str, Counter[str]] = {"calls": Counter(), "filtered": Counter(), "hidden": Counter()}
_STATS_LOCK = threading.Lock()


def reset_stats() -> None:
    """Zero :data:`STATS` (tests and benchmarks)."""
    with _STATS_LOCK:
        for counter in STATS.values():
            counter.clear()


def kernel_name(autotuner: Any) -> str:
    """The kernel a ``CachingAutotuner`` tunes (``inductor_meta["kernel_name"]``, else its Triton
    function's name); ``"?"`` when neither can be read (a detail for the report, never raises)."""
    try:
        meta = getattr(autotuner, "inductor_meta", None)
        name = meta.get("kernel_name") if isinstance(meta, dict) else None
        return str(name or getattr(getattr(autotuner, "fn", None), "__name__", None) or "?")
    except Exception:  # noqa: BLE001 - a detail must never break autotuning
        return "?"


def filtered(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrapper factory: ``original`` runs with the ``ignore_compile_internals()`` modes hidden.

    On an empty mode stack (the common case: autotuning outside SAC) the wrapper costs one C call.
    """
    from torchfix_autotune.modes import _len_stack, without_compile_internal_modes

    name = original.__name__

    @functools.wraps(original)
    def run_without_compile_internal_modes(*args: Any, **kwargs: Any) -> Any:
        with _STATS_LOCK:
            STATS["calls"][name] += 1
        if _len_stack() == 0:
            return original(*args, **kwargs)
        with without_compile_internal_modes() as hidden:
            if hidden:
                with _STATS_LOCK:
                    STATS["filtered"][name] += 1
                    STATS["hidden"].update(type(mode).__name__ for mode in hidden)
                ACTED.note("hid-modes", kernel_name(args[0]) if args else "?")
            return original(*args, **kwargs)

    return run_without_compile_internal_modes


class AutotuneFix(Fix):
    """Wraps ``CachingAutotuner.bench``, ``.autotune_to_one_config`` and ``.coordinate_descent_tuning``.

    ``probe()`` answers not-needed where SAC replay is lenient (an unrecorded op is re-executed, so
    autotuning during recompute cannot fail), and refuses when a patch point or a mode-stack
    primitive is missing or has another signature. ``apply()`` installs the three wrappers through
    ``self.patches`` (reverted exactly by the core).
    """

    def probe(self) -> ProbeResult:
        replay = probes.sac_replay_behaviour()
        if not replay.strict:
            return ProbeResult(False, f"{replay.detail}, so autotuning during recompute cannot fail")
        probes.check_primitives()
        probes.check_patch_points()
        filter_note = probes.check_filter()
        return ProbeResult(
            True,
            f"{replay.detail}; CachingAutotuner.{'/'.join(probes.PATCH_POINTS)} have the expected "
            f"signatures; {filter_note}",
        )

    def apply(self) -> None:
        cls = probes.check_patch_points()
        for name, params in probes.PATCH_POINTS.items():
            self.patches.wrap(cls, name, filtered, signature=params)
