"""Turn SAC's "... not found in storage" replay error into an explanation of what differed.

When the recompute of a selective-activation-checkpoint (SAC) region dispatches an op the forward
did not record, ``torch.utils.checkpoint._CachedTorchDispatchMode`` raises
``RuntimeError("<op> encountered during backward but not found in storage. ...")`` (2.13+, strict
replay) or ``"<op> encountered during backward, but not found in storage"`` (2.11/2.12). The message
names the op but not why the recompute differed. :func:`explained` builds an exception of the same
type whose message appends the evidence torchfix can gather without changing torch's behaviour:

* the SAC storage and the op, read from the raising ``__torch_dispatch__`` frame in the traceback
  (which ops the forward recorded, e.g. Inductor's extern ``aten.mm.out``);
* where the missing op was dispatched from (eager Python code, an Inductor-compiled artifact, or
  Inductor autotuning: ``triton_heuristics.bench`` / ``autotune_to_one_config`` /
  ``coordinate_descent_tuning``), from the same traceback;
* how many frames Dynamo compiled and how often it hit a recompile limit while the recompute ran
  (``counters["frames"]`` deltas around the recompute, remembered as plain integers; the limit hits
  from Dynamo's recent compilation records, read only when the error is raised; all process-wide,
  so another thread compiling at the same moment is counted too, and the message says so);
* which compiler config overrides differ between the forward's context and the recompute thread's
  own context (the per-thread config of torch 2.12+, pytorch#186537).

The caller chains the original (``raise new from original``); nothing here swallows or retries.
This module imports nothing heavy: it reads ``sys.modules`` and never imports Dynamo or Inductor.
"""

from __future__ import annotations

import collections
import contextvars
import os
import sys
import threading
import time
import types
from typing import Any, NamedTuple

STORAGE_MISS = "not found in storage"
_MARK = "__torchfix_sac_replay_explained__"
HEADER = "[torchfix sac-replay]"
DOCS = "docs/fixes/sac-replay.md"
_UNSET = object()
_MAX_DIFFS = 12
_MAX_REPR = 80

# Frames that only forward a call (decorators, dispatch plumbing); skipped when looking for the
# code that dispatched the missing op.
_PLUMBING = (
    "/torch/_compile.py",
    "/torch/_dynamo/eval_frame.py",
    "/torch/_dynamo/external_utils.py",
    "/torch/utils/_python_dispatch.py",
    "/torch/_ops.py",
    "/torch/overrides.py",
    "/torch/_tensor.py",
    "/torch/utils/_contextlib.py",
    "/torch/utils/checkpoint.py",
    "/contextlib.py",
)
# Code that belongs to a compiled artifact (Inductor output, AOTAutograd runtime, FX graph code).
_COMPILED = ("torch/_inductor/", "torch/_functorch/", "torch/_higher_order_ops/", "torchinductor")
_AUTOTUNE_FILES = (
    "torch/_inductor/runtime/triton_heuristics.py",
    "torch/_inductor/runtime/benchmarking.py",
    "torch/_inductor/runtime/coordinate_descent_tuner.py",
)
_AUTOTUNE_NAMES = {
    "bench",
    "autotune_to_one_config",
    "coordinate_descent_tuning",
    "benchmark_all_configs",
    "benchmark_gpu",
    "benchmark",
    "autotune",
}


class DynamoMarks(NamedTuple):
    """Process-wide Dynamo counters at one moment (see ``torch._dynamo.utils.counters``) and the
    wall clock, as :func:`dynamo_marks` returns them (a plain tuple of three ints)."""

    frames_total: int
    frames_ok: int
    time_ns: int


def dynamo_marks(_modules: dict[str, Any] = sys.modules, _time_ns: Any = time.time_ns) -> tuple[int, int, int]:
    """What a recompute remembers beforehand: ``(frames_total, frames_ok, time.time_ns())``.

    O(1) and independent of the process's history: two lookups in ``counters["frames"]`` and a clock
    read (about 0.2 us). It never walks ``counters["unimplemented"]`` (one key per graph-break
    reason ever recorded: thousands in a large model); the recompile-limit evidence is read only when
    the error is raised (:func:`recompile_limit_hits`). ``(0, 0, t)`` when Dynamo is not imported.
    Never raises.
    """
    try:
        counters = getattr(_modules.get("torch._dynamo.utils"), "counters", None)
        frames = counters.get("frames") if counters is not None else None
        if frames:
            return (frames.get("total", 0), frames.get("ok", 0), _time_ns())
    except Exception:  # noqa: BLE001 - a diagnostic must never break the recompute
        pass
    return (0, 0, _time_ns())


def recompile_limit_hits(since_ns: int, failed_frames: int) -> tuple[int, bool]:
    """Error path only: how many compiles failed on a Dynamo recompile limit since ``since_ns``.

    Returns ``(hits, exact)``. Exact where Dynamo keeps its recent compilation records
    (``torch._dynamo.utils._compilation_metrics``, a deque of at most 64 ``CompilationMetrics``; 2.13
    records a limit hit as a compile whose ``fail_reason`` is "Dynamo recompile limit exceeded"):
    the records that ended at or after ``since_ns`` and failed on a limit. Elsewhere, an inference:
    the ``failed_frames`` that failed while the recompute ran, if ``counters["unimplemented"]`` holds
    any recompile-limit reason at all (a walk of every reason, done only here). Never raises.
    """
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        records = getattr(utils, "_compilation_metrics", None)
        if isinstance(records, collections.deque):
            since_us = since_ns // 1000
            hits = 0
            for record in tuple(records):  # tuple(): a C-level copy, safe while another thread appends
                end = getattr(record, "end_time_us", None)
                reason = getattr(record, "fail_reason", None)
                if isinstance(end, int) and end >= since_us and reason and "recompile limit" in str(reason).lower():
                    hits += 1
            return hits, True
        if failed_frames <= 0:
            return 0, True
        unimplemented = getattr(utils, "counters", {}).get("unimplemented")
        seen = bool(unimplemented) and any("recompile limit" in str(k).lower() for k in tuple(unimplemented or ()))
        return (failed_frames if seen else 0), False
    except Exception:  # noqa: BLE001 - best effort
        return 0, False


def thread_name(ident: int) -> str:
    """The name of the live thread with ``threading.get_ident() == ident`` (error path: O(threads))."""
    for thread in threading.enumerate():
        if thread.ident == ident:
            return thread.name
    return f"<thread {ident}, no longer running>"


def is_storage_miss(exc: BaseException) -> bool:
    """True for SAC's replay error that torchfix has not explained yet."""
    return STORAGE_MISS in str(exc) and not getattr(exc, _MARK, False)


def _path(frame: types.FrameType) -> str:
    return frame.f_code.co_filename.replace(os.sep, "/")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _key_name(key: Any) -> str:
    if isinstance(key, tuple) and key:
        head = key[0]
        name = getattr(head, "_name", None) or getattr(head, "__name__", None) or str(head)
        return f"{name}[region {key[1]}]" if len(key) > 1 else str(name)
    return str(key)


def _entries(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        return 1


class Evidence:
    """What the traceback, the SAC storage and Dynamo's counters say about one failed recompute."""

    def __init__(self, exc: BaseException) -> None:
        frames: list[tuple[types.FrameType, int]] = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        self.op: str | None = None
        self.storage: dict[str, int] = {}
        self.site: str | None = None
        self.site_compiled = False
        self.mode_ignores_compiled = False  # SAC's mode skips compiled code (ignore_compile_internals)
        self.autotune: list[str] = []
        dispatch_index = None
        for i in range(len(frames) - 1, -1, -1):
            frame = frames[i][0]
            if frame.f_code.co_name == "__torch_dispatch__" and hasattr(frame.f_locals.get("self"), "storage"):
                dispatch_index = i
                mode = frame.f_locals["self"]
                func = frame.f_locals.get("func")
                self.op = str(func) if func is not None else None
                try:
                    self.mode_ignores_compiled = bool(type(mode).ignore_compile_internals())
                except Exception:  # noqa: BLE001 - older modes have no such classmethod
                    self.mode_ignores_compiled = False
                try:
                    self.storage = {_key_name(k): _entries(v) for k, v in tuple(mode.storage.items())}
                except Exception:  # noqa: BLE001 - best effort
                    self.storage = {}
                break
        inner = frames if dispatch_index is None else frames[:dispatch_index]
        for frame, lineno in reversed(inner):
            path = _path(frame)
            if self.site is None and not path.endswith(_PLUMBING):
                self.site = f"{os.path.basename(path)}:{lineno} in {frame.f_code.co_name}"
                self.site_compiled = any(part in path for part in _COMPILED) or path.startswith("<eval_with_key>")
            if path.endswith(_AUTOTUNE_FILES) and frame.f_code.co_name in _AUTOTUNE_NAMES:
                self.autotune.append(f"{os.path.basename(path)}::{frame.f_code.co_name}")

    @property
    def forward_compiled(self) -> list[str]:
        """Recorded ops that only compiled code dispatches (extern ``.out`` kernels, compiled-region HOPs)."""
        return [k for k in self.storage if k.endswith(".out") or "[region" in k or "inductor_compiled_code" in k]


def config_differences(forward: contextvars.Context, here: contextvars.Context) -> list[str]:
    """Compiler config overrides (every loaded ``ConfigModule``) that differ between two contexts.

    On torch 2.11 overrides are plain attributes, not ContextVars, and nothing is reported.
    """
    cm = sys.modules.get("torch.utils._config_module")
    config_module_type = getattr(cm, "ConfigModule", None)
    if not isinstance(config_module_type, type):
        return []
    diffs: list[str] = []
    for mod_name, module in tuple(sys.modules.items()):
        if not isinstance(module, config_module_type):
            continue
        table = getattr(module, "_config", None)
        if not isinstance(table, dict):
            continue
        for key, entry in tuple(table.items()):
            var = getattr(entry, "user_override", None)
            if not isinstance(var, contextvars.ContextVar):
                continue
            a, b = forward.get(var, _UNSET), here.get(var, _UNSET)
            if a is b:
                continue
            va, vb = _effective(module, key, forward), _effective(module, key, here)
            try:
                if va == vb:
                    continue
            except Exception:  # noqa: BLE001 - incomparable values count as different
                pass
            diffs.append(f"{mod_name}.{key}: forward {_short(va)}, recompute thread {_short(vb)}")
    diffs.sort()
    return diffs


def _effective(module: Any, key: str, ctx: contextvars.Context) -> Any:
    try:
        return ctx.copy().run(getattr, module, key)
    except Exception:  # noqa: BLE001 - unreadable values are shown as such
        return "<unreadable>"


def describe(
    exc: BaseException,
    *,
    forward_context: contextvars.Context,
    here_context: contextvars.Context,
    forward_thread: str,
    recompute_thread: str,
    before: tuple[int, int, int] | None,
    after: tuple[int, int, int] | None,
) -> str:
    """The explanation appended to the original message (several lines, each a finding + its remedy).

    ``before`` / ``after`` are :func:`dynamo_marks` taken around the recompute; everything else is
    read here, on the error path."""
    ev = Evidence(exc)
    findings: list[str] = []
    compiled_fwd = ev.forward_compiled
    compiled_frames = ok_frames = limit_hits = 0
    exact = True
    if before is not None and after is not None:
        b, a = DynamoMarks(*before), DynamoMarks(*after)
        compiled_frames = a.frames_total - b.frames_total
        ok_frames = a.frames_ok - b.frames_ok
        limit_hits, exact = recompile_limit_hits(b.time_ns, compiled_frames - ok_frames)
    shared = " (process-wide counters: compiles on other threads at the same time are included)"

    if ev.autotune:
        findings.append(
            f"autotuning during recompute: {ev.op or 'the op'} was dispatched by Inductor autotuning "
            f"({', '.join(dict.fromkeys(ev.autotune))}) inside the replay, so its benchmark allocations and "
            "copies reach SAC; the kernel was cold because the recompute ran a different compiled artifact "
            "than the forward. Fix: install torchfix-autotune (runs autotuning outside SAC's modes), and find "
            "why the recompute recompiled (TORCH_LOGS=recompiles)."
        )
    if limit_hits > 0:
        how_often = (
            f"hit its recompile limit {limit_hits} time(s)"
            if exact
            else f"failed to compile {limit_hits} frame(s) and has hit a recompile limit in this process (inferred)"
        )
        findings.append(
            f"recompile limit hit during recompute: Dynamo missed the forward's cache entry, {how_often} "
            f"and ran the frame eagerly{shared}. The recompute ran under "
            "the forward's config (carried by torchfix sac-replay), so the forward's own limit was reached. "
            "Fix: raise torch._dynamo.config.recompile_limit or pass torch.compile(..., recompile_limit=N) "
            "(2.13+), and find the guard failure with TORCH_LOGS=recompiles."
        )
    elif compiled_frames > 0:
        findings.append(
            f"recompile during recompute: Dynamo compiled {compiled_frames} frame(s) ({ok_frames} succeeded) "
            f"while the recompute ran{shared}: the recompute missed the forward's guards and ran a newly "
            "compiled graph whose op sequence differs. Fix: find the guard failure with TORCH_LOGS=recompiles "
            "(a global or attribute changed between forward and backward, a different TorchFunctionMode "
            "stack); pair torchfix sac-replay with torchfix-autotune for cold kernels."
        )
    # torch <= 2.12: SAC's modes skip compiled code entirely, so a compiled forward records nothing
    # (2.13+ records its extern kernels and regions, the evidence above)
    nothing_recorded = not ev.storage and ev.op is not None and ev.mode_ignores_compiled
    if (compiled_fwd or nothing_recorded) and not ev.site_compiled:
        where = f" from eager code ({ev.site})" if ev.site else " from eager code"
        cause = (
            "because of the recompile limit above"
            if limit_hits > 0
            else "because Dynamo did not run the compiled artifact for the recompute (eager fallback, "
            "torch._dynamo.disable, or a different callable)"
        )
        if compiled_fwd:
            what = f"compiled forward replayed eagerly: the forward recorded Inductor-compiled ops ({', '.join(compiled_fwd[:4])})"
        else:
            what = (
                "compiled forward replayed eagerly (likely): the forward recorded nothing for SAC to replay, and "
                "SAC's modes ignore compiled code on this torch (ignore_compile_internals), so a forward that "
                f"ran torch.compile'd code records nothing (otherwise the forward never ran {ev.op})"
            )
        findings.append(
            f"{what}, but the recompute dispatched {ev.op or 'an op'}{where}, {cause}. "
            "Fix: checkpoint inside the compiled region, torch.compile(checkpoint_wrapper(block, "
            f"context_fn=...)), so SAC sees no runtime dispatches (see {DOCS})."
        )
    elif compiled_fwd and ev.site_compiled and not ev.autotune and compiled_frames <= 0:
        findings.append(
            f"compiled artifact differs: both passes ran compiled code, but the recompute's artifact dispatched "
            f"{ev.op or 'an op'} ({ev.site}) that the forward's did not; e.g. a cache entry chosen differently "
            "(pytorch#166926) or a kernel compiled earlier by another thread."
        )

    diffs = config_differences(forward_context, here_context)
    if diffs:
        shown = "; ".join(diffs[:_MAX_DIFFS]) + (
            f"; ... {len(diffs) - _MAX_DIFFS} more" if len(diffs) > _MAX_DIFFS else ""
        )
        findings.append(
            f"thread-local config: the recompute thread's own context differs from the forward's ({shown}). "
            "torchfix sac-replay ran this recompute in the forward's context, so these were carried and are "
            "not the cause; without it (torch 2.12+, pytorch#186537) the recompute would have used the "
            "recompute thread's values."
        )
    else:
        findings.append(
            "thread-local config: no compiler config override differs between the forward and the recompute thread."
        )
    if len(findings) == 1:
        findings.insert(
            0,
            "no compiled code, recompile or autotuning was seen in the recompute: the region itself is "
            "nondeterministic or reads global state that changed between forward and backward.",
        )

    recorded = ", ".join(f"{k} x{n}" for k, n in list(ev.storage.items())[:8]) or "nothing"
    lines = [
        "",
        "",
        f"{HEADER} What differed between the forward (thread {forward_thread!r}) and this recompute "
        f"(thread {recompute_thread!r}):",
        *(f"  - {f}" for f in findings),
        f"  Forward recorded: {recorded}. Recompute asked for: {ev.op or 'unknown'}"
        + (f" (from {ev.site})." if ev.site else "."),
        f"  Original error chained as __cause__. Details: {DOCS} (torchfix-sac-replay).",
    ]
    return "\n".join(lines)


def explained(exc: BaseException, message: str) -> BaseException | None:
    """A new exception of ``type(exc)`` carrying ``message``, marked as explained; None if the type
    cannot be built from one message (the caller then re-raises the original unchanged)."""
    try:
        new = type(exc)(message)
    except Exception:  # noqa: BLE001 - an exotic constructor: keep the original
        return None
    if type(new) is not type(exc):
        return None
    try:
        setattr(new, _MARK, True)
    except Exception:  # noqa: BLE001
        pass
    return new
