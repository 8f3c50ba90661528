"""Per-fix tallies of the moments a fix acted: what ``torchfix_core.report()`` shows.

A fix's implementation takes its tally once, at import, declaring its events, and counts where it
acts::

    from torchfix_core.tallies import tally_and_log

    ACTED, log = tally_and_log("my-fix", "saved-random-op")  # or ACTED = tally(...): no logger
    COUNTS = ACTED.counts                         # a plain dict, every declared event at 0
    ...
    COUNTS["saved-random-op"] += 1                # the hot form: two dict operations, no call
    ACTED.note("fell-back", "Unsupported: ...")   # an event with a detail (rare paths only)

Code a fix writes into another module's source (:mod:`torchfix_core.sourcepatch`, a code swap)
runs with that module's globals, which torchfix does not touch; it reaches the fix's counts through
:func:`counts_expression`, one ``sys.modules`` lookup on the line where the fix acts.

``counts`` is an exact ``dict`` (CPython specialises ``d[k] += 1`` for it, not for subclasses):
benchmarks/report_overhead.py measures the cost of one event and docs/performance.md quotes it.
Declared events start at 0, so a report shows "declared, never happened" as 0 rather than
leaving the event out. Count only where the fix changes something, never on a path where it
steps aside. Counting is per process and is not synchronised: two threads counting the same event
at the same moment may lose one increment (the GIL makes each dict operation atomic, not the
pair), which a report of "did it act, and about how often" tolerates; details are kept under a
lock.

A fix's logger is ``torchfix.<fix id>``, a child of the ``torchfix`` logger that ``TORCHFIX_LOG``
sets up: :func:`tally_and_log` gives the tally and that logger from the one id, so what a fix
counts and what it logs are found under the same name.

This module imports only ``logging`` and ``threading`` (both already imported by ``import torch``).
"""

from __future__ import annotations

import logging
import threading

__all__ = ["MAX_DETAILS", "MAX_DETAIL_CHARS", "Tally", "counts_expression", "tallies", "tally", "tally_and_log"]

#: distinct details kept per event (later distinct ones are counted under ``"(more)"``)
MAX_DETAILS = 20
#: longest detail kept (longer ones are cut)
MAX_DETAIL_CHARS = 300


def counts_expression(module: str, attribute: str = "COUNTS") -> str:
    """Python source of an expression that evaluates to ``<module>.<attribute>`` (a fix's
    ``Tally.counts``) from any globals: ``__import__('<module>', fromlist=('<attribute>',)).<attribute>``,
    for code written into a patched module's source. ``module`` must be imported before that code
    runs (the fix's own implementation module is: it applied the patch), so the import is a
    ``sys.modules`` hit; the builtin ``__import__`` is looked up in the patched module's builtins."""
    if not module.replace(".", "").replace("_", "").isalnum() or not attribute.isidentifier():
        raise ValueError(f"not a module / attribute name: {module!r}, {attribute!r}")
    return f"__import__({module!r}, fromlist=({attribute!r},)).{attribute}"


class Tally:
    """The events of one fix: ``counts`` (event -> count) and a few details per event."""

    __slots__ = ("fix_id", "counts", "details", "_lock")

    def __init__(self, fix_id: str, events: tuple[str, ...] = ()) -> None:
        self.fix_id = fix_id
        #: event -> count; every declared event is present (0 until it happens)
        self.counts: dict[str, int] = dict.fromkeys(events, 0)
        #: event -> detail -> count (at most :data:`MAX_DETAILS` distinct details per event)
        self.details: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def declare(self, events: tuple[str, ...]) -> None:
        """Add events (at 0) that are not declared yet."""
        for event in events:
            self.counts.setdefault(event, 0)

    def note(self, event: str, detail: object) -> None:
        """Count ``event`` once (declared or not) and keep ``detail`` (``str()``-ed, cut to
        :data:`MAX_DETAIL_CHARS`) among its details. Never raises."""
        try:
            text = str(detail)[:MAX_DETAIL_CHARS]
        except Exception:  # noqa: BLE001 - a detail must never break the fix's path
            text = f"<{type(detail).__name__}>"
        with self._lock:
            self.counts[event] = self.counts.get(event, 0) + 1
            kept = self.details.setdefault(event, {})
            if text in kept or len(kept) < MAX_DETAILS:
                kept[text] = kept.get(text, 0) + 1
            else:
                kept["(more)"] = kept.get("(more)", 0) + 1

    @property
    def acted(self) -> int:
        """Events counted in all (0: the fix never acted in this process)."""
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, object]:
        """``{"events": {...}, "details": {...}}``, copies (JSON-ready)."""
        with self._lock:
            details = {event: dict(kept) for event, kept in self.details.items()}
            events = {k: int(v) for k, v in sorted(self.counts.items())}
        return {"events": events, "details": details}

    def clear(self) -> None:
        """Set every count to 0 and forget the details (tests and benchmarks; a fix never calls it)."""
        with self._lock:
            for event in self.counts:
                self.counts[event] = 0
            self.details.clear()


_TALLIES: dict[str, Tally] = {}
_LOCK = threading.Lock()


def tally(fix_id: str, *events: str) -> Tally:
    """The one :class:`Tally` of ``fix_id`` in this process (created on first use), with
    ``events`` declared."""
    with _LOCK:
        found = _TALLIES.get(fix_id)
        if found is None:
            found = _TALLIES[fix_id] = Tally(fix_id, events)
        else:
            found.declare(events)
    return found


def tallies() -> dict[str, Tally]:
    """Every tally made in this process: fix id -> :class:`Tally` (a copy of the index)."""
    with _LOCK:
        return dict(_TALLIES)


def tally_and_log(fix_id: str, *events: str) -> tuple[Tally, logging.Logger]:
    """``(tally(fix_id, *events), logging.getLogger("torchfix." + fix_id))``: the fix's tally and
    its logger, named from one id, for an implementation module that serves one fix."""
    return tally(fix_id, *events), logging.getLogger(f"torchfix.{fix_id}")
