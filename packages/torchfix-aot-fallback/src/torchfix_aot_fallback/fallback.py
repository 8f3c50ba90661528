"""The fallback itself: run an AOT attempt under the policy, build the JIT stand-in, record it.

Every fallback (and every memo skip) is recorded per process in :func:`fallbacks` and summarized
in the fix's row of ``torchfix_core.status()`` / ``torchfix-doctor``; each distinct cause is logged
once as a warning on ``torchfix.aot-fallback``. Each one is also counted in the fix's tally
(``torchfix_core.report()``): the event is the record's kind (:data:`EVENTS`), the detail
``<function>: <cause>``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable

from torchfix_core.tallies import Tally, tally_and_log

from torchfix_aot_fallback import memo, policy

FIX_ID = "aot-fallback"
log = logging.getLogger("torchfix.aot-fallback")

#: record kind -> the report's event name (one event per way of falling back)
EVENTS = {
    "compile": "fell-back-on-compile",
    "memo": "skipped-aot-by-memo",
    "guard-miss": "served-guard-miss-by-jit",
    "load": "recompiled-unloadable-artifact",
    "magi-compile": "fell-back-magi-state",
}


@dataclass(frozen=True)
class FallbackRecord:
    """One fallback. ``kind``: ``"compile"`` (AOT compile failed), ``"memo"`` (skipped: a memo entry
    says it fails), ``"guard-miss"`` (an artifact's guards rejected the inputs) or ``"load"`` (an
    artifact could not be loaded, :func:`~torchfix_aot_fallback.api.load_or_compile` only)."""

    kind: str
    function: str
    cause: str
    memo_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class FallbackLog:
    """The fallbacks one fix made in this process, oldest first, with its warn-once set
    (thread-safe), that fix's tally (``torchfix_core.report()``) and its logger ``torchfix.<fix id>``.
    The torch-level fix and the Magi adapter each keep one; ``events`` are the record kinds the fix
    declares (at 0)."""

    def __init__(self, fix_id: str, events: tuple[str, ...]) -> None:
        self._lock = threading.Lock()
        self._records: list[FallbackRecord] = []
        self._warned: set[str] = set()
        self.tally: Tally
        self.log: logging.Logger
        self.tally, self.log = tally_and_log(fix_id, *(EVENTS[kind] for kind in events))

    def add(self, rec: FallbackRecord, once: str, message: str) -> None:
        """Record ``rec`` and count it (event of its kind, detail ``<function>: <cause>``); log
        ``message`` as a warning the first time ``once`` is seen. A fallback is a rare path: the
        tally's ``note`` (a lock) is fine here."""
        with self._lock:
            self._records.append(rec)
            first = once not in self._warned
            self._warned.add(once)
        self.tally.note(EVENTS.get(rec.kind, rec.kind), f"{rec.function}: {rec.cause}")
        if first:
            self.log.warning("%s", message)

    def records(self) -> list[FallbackRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._warned.clear()


_log = FallbackLog(FIX_ID, ("compile", "memo", "guard-miss", "load"))


def fallbacks() -> list[FallbackRecord]:
    """Every fallback this process made, oldest first."""
    return _log.records()


def reset_records() -> None:
    """Forget the recorded fallbacks and warnings (tests)."""
    _log.clear()


def summary() -> str:
    """One line for doctor: how many fallbacks of each kind, and the last cause."""
    records = _log.records()
    if not records:
        return "no AOT->JIT fallback in this process"
    counts: dict[str, int] = {}
    for r in records:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    last = records[-1]
    kinds = ", ".join(f"{n} {k}" for k, n in counts.items())
    return f"AOT->JIT fallbacks in this process: {kinds}; last: {last.function}: {last.cause}"


def name_of(model: Any) -> str:
    code = getattr(getattr(model, "_artifacts", None), "original_code", None)
    if isinstance(code, types.CodeType):
        return f"{code.co_filename}:{getattr(code, 'co_qualname', code.co_name)}"
    target = model.__func__ if isinstance(model, types.MethodType) else model
    qual = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{getattr(target, '__module__', '?')}.{qual}"


def note(rec: FallbackRecord, message: str) -> None:
    """Record ``rec``, warn once per (kind, function, cause), refresh the doctor row."""
    _log.add(rec, f"{rec.kind}|{rec.function}|{rec.cause}", message)


class JITFallback:
    """What an AOT compile returns when it fell back: a lazily JIT-compiled ``torch.compile``
    callable (``fullgraph=False``, same backend and ``dynamic``).

    It is not serializable: ``save_compiled_function`` writes nothing, logs a warning and returns
    None (a loader must be ready for the file to be missing; :func:`~torchfix_aot_fallback.api.
    load_or_compile` is). ``torchfix_fallback`` holds the :class:`FallbackRecord`.
    """

    def __init__(self, compiled: Callable[..., Any], record: FallbackRecord) -> None:
        self._compiled = compiled
        self.torchfix_fallback = record

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def save_compiled_function(self, path: str, external_data: Any = None) -> None:
        log.warning(
            "torchfix aot-fallback: %s fell back to JIT (%s); nothing saved to %s",
            self.torchfix_fallback.function,
            self.torchfix_fallback.cause,
            path,
        )
        return None

    def __repr__(self) -> str:
        return f"JITFallback({self.torchfix_fallback.function}: {self.torchfix_fallback.cause})"


def make_jit(model: Any, backend: Any, dynamic: Any) -> Callable[..., Any]:
    """``torch.compile(model, backend=backend, dynamic=dynamic)`` (graph breaks allowed)."""
    import torch

    return torch.compile(model, backend=backend, dynamic=dynamic)  # type: ignore[no-any-return]


_inside = threading.local()


def outer_policy() -> contextlib.AbstractContextManager[None]:
    """Inside the block (this thread), the patched torch entry points run their AOT attempt plainly:
    a caller that applies the policy to a larger unit (a framework's compile state, e.g. the
    ``magi-aot-fallback`` fix) decides once, and sees the original exception. :func:`run` itself
    holds it around its attempt, so nested calls leave the decision to the outermost one."""
    return policy.thread_setting(_inside, "active", True)


def run(
    attempt: Callable[[], Any],
    model: Any,
    example_inputs: Any,
    backend: Any,
    dynamic: Any,
    jit: Callable[[], Callable[..., Any]] | None = None,
) -> Any:
    """Run the AOT ``attempt`` under the policy.

    * strict (:func:`policy.is_strict`): just ``attempt()``; any error propagates unchanged.
    * a memo entry for (model, inputs, backend, dynamic) exists: skip ``attempt`` and return a
      :class:`JITFallback` (warned once, recorded as ``"memo"``).
    * ``attempt()`` raises an "AOT unsupported" error (:func:`policy.classify`): return a
      :class:`JITFallback`, write the memo entry; otherwise re-raise the original exception.

    Nested calls (the public helper around a patched entry point) run the inner attempt plainly:
    the outermost policy decides once.
    """
    if policy.is_strict() or getattr(_inside, "active", False):
        return attempt()
    fname = name_of(model)
    use_memo = policy.memo_enabled()
    k: str | None = None
    if use_memo:
        try:
            k = memo.key(model, example_inputs, backend, dynamic)
        except Exception:  # noqa: BLE001 - an unkeyable model just runs without the memo
            log.debug("no memo key for %s", fname, exc_info=True)
            k = None
        entry = memo.lookup(k) if k is not None else None
        if entry is not None:
            rec = FallbackRecord("memo", fname, str(entry.get("cause", "?")), k)
            note(
                rec,
                f"torchfix aot-fallback: skipping the AOT compile of {fname}: it failed before on this torch "
                f"and input signature ({rec.cause}); using JIT. Memo {memo.memo_dir()}/{k}.json; "
                f"{policy.MEMO_ENV}=0 disables it",
            )
            return JITFallback((jit or (lambda: make_jit(model, backend, dynamic)))(), rec)
    try:
        with outer_policy():
            return attempt()
    except Exception as exc:
        verdict = policy.classify(exc)
        if not verdict.fallback:
            raise
        cause = verdict.reason
    rec = FallbackRecord("compile", fname, cause, k)
    if k is not None:
        memo.record(k, cause, fname)
    note(
        rec,
        f"torchfix aot-fallback: AOT compile of {fname} is unsupported ({cause}); using JIT torch.compile "
        f"instead. {policy.STRICT_ENV}=1 makes this an error",
    )
    return JITFallback((jit or (lambda: make_jit(model, backend, dynamic)))(), rec)
