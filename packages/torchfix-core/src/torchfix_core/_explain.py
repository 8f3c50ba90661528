"""Known failures: match logs, tracebacks and live exceptions against the bugs torchfix knows.

What is matched (docs/diagnosis.md):

* every fix's :class:`~torchfix_core.spec.Signature` records: from the spec of an installed fix
  (discovery loads only its data-only ``package`` module), else from a family's catalog (entry-point
  group ``torchfix.catalog``: torchfix-all publishes the family's, generated from the fixes' specs),
  so that a fix that is not installed here is still recognised and its pip command shown. The core
  itself names no fix: without a catalog, explain knows the installed fixes and the bugs below;
* the investigated bugs that have no fix (:mod:`torchfix_core._known_bugs`), with their workaround.

A signature matches a failure when the failure's exception class (the last dotted part of the
name a traceback prints; in process, any class of the exception's MRO) equals the signature's
``exception`` and its regular expression ``message`` is found in the failure's message. Silent
signatures (a symptom in words) never match text.

Text input is read as logs: ``[rank3]:`` / ``[default3]:`` prefixes (torchrun) are stripped and
give the rank; a file holding torchelastic's error-file JSON (``{"message": {"message": ...,
"extraInfo": {"py_callstack": ...}}}``) is read through its traceback. This module imports no
torch: ``torchfix-doctor explain`` works on a machine without it, from the signatures alone.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

__all__ = [
    "Failure",
    "KnownEntry",
    "Match",
    "diagnose",
    "failures_in_exception",
    "failures_in_text",
    "known_entries",
    "match_failures",
    "read_source",
]

#: every fix of the family has its page at this path of the torchfix repository (a test checks it)
DOCS_PAGE = "docs/fixes/{id}.md"
DIAGNOSIS_PAGE = "docs/diagnosis.md"
HEADER = "[torchfix]"
_RANK_PREFIX = re.compile(r"^\s*\[(?:rank|default)(\d+)\]:[ ]?")
_BLOCK_END = re.compile(
    r"^(Traceback \(most recent call last\):|During handling of the above exception|"
    r"The above exception was the direct cause|Exception in thread )"
)
_CHAIN_LINES = ("The above exception was the direct cause", "During handling of the above exception")
#: log lines before a traceback that a signature's ``context`` may also match (warnings logged
#: just before the failure, e.g. Dynamo's "last reason" of a recompile-limit hit)
CONTEXT_LEAD_LINES = 40
#: a "Traceback" line further back than this is not the failure's own (an unrelated block)
MAX_TRACEBACK_LINES = 600
#: longest message read after an exception header (lines, characters)
MAX_MESSAGE_LINES = 80
MAX_MESSAGE_CHARS = 8000


@dataclasses.dataclass(frozen=True)
class KnownEntry:
    """A bug torchfix knows: a fix of the family (``fix_id`` set) or an investigated bug without a fix."""

    id: str
    summary: str
    upstream: tuple[str, ...]
    signatures: tuple[Mapping[str, str], ...]
    distribution: str = ""
    targets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    workaround: str = ""
    page: str = ""
    source: str = "catalog"  # "installed spec", "catalog" or "investigated"

    @property
    def is_fix(self) -> bool:
        return bool(self.distribution)


@dataclasses.dataclass(frozen=True)
class Failure:
    """One exception seen: its class name (as printed), message, and where it was seen."""

    exception: str
    message: str
    where: str = ""
    rank: str | None = None
    mro: tuple[str, ...] = ()
    #: the traceback printed before the message and, in a log, the same rank's lines just before it
    #: ("" when the input has no traceback)
    traceback: str = ""

    def names(self) -> tuple[str, ...]:
        return self.mro or (self.exception.rsplit(".", 1)[-1],)

    def headline(self, width: int = 160) -> str:
        first = (self.message.strip().splitlines() or [""])[0]
        return f"{self.exception}: {first[:width]}"


@dataclasses.dataclass(frozen=True)
class Match:
    entry: KnownEntry
    signature: Mapping[str, str]
    failure: Failure


# -- what is known ---------------------------------------------------------------------------------
def _spec_entry(spec: Any) -> KnownEntry:
    return KnownEntry(
        id=spec.id,
        summary=spec.summary,
        upstream=tuple(spec.upstream),
        signatures=tuple(s.as_dict() for s in spec.signatures),
        distribution=spec.distribution,
        targets=dict(spec.targets),
        page=DOCS_PAGE.format(id=spec.id),
        source="installed spec",
    )


def catalog_entries() -> list[KnownEntry]:
    """The fixes of every installed family catalog (``torchfix.catalog``; torchfix-all's). A catalog
    that cannot be read, or a row without its ``id`` / ``summary`` / ``distribution``, is reported on
    stderr and skipped; the rest is used."""
    from torchfix_core._loading import catalog

    rows, problems = catalog()
    entries: list[KnownEntry] = []
    for row in rows:
        try:
            entries.append(
                KnownEntry(
                    id=str(row["id"]),
                    summary=str(row["summary"]),
                    upstream=tuple(row.get("upstream", ())),
                    signatures=tuple(row.get("signatures", ())),
                    distribution=str(row["distribution"]),
                    targets=dict(row.get("targets", {})),
                    page=str(row.get("page") or DOCS_PAGE.format(id=row["id"])),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"catalog row {str(row)[:120]!r} is malformed ({type(exc).__name__}: {exc})")
    for problem in problems:
        print(f"{HEADER} {problem}: skipped", file=sys.stderr)
    return entries


def has_catalog() -> bool:
    """Whether a family catalog is installed (explain says so when none is)."""
    from torchfix_core._discovery import CATALOG_GROUP, scan_entry_points

    return bool(scan_entry_points(CATALOG_GROUP))


def installed_specs() -> dict[str, Any]:
    """fix id -> spec of every installed fix whose spec loads (no torch import: data-only modules)."""
    from torchfix_core import _registry

    return {fix_id: entry.spec for fix_id, entry in _registry.entries().items() if entry.item.spec is not None}


def known_entries(include_installed: bool = True) -> list[KnownEntry]:
    """Every known bug: installed specs first (they win over a catalog's row), then the catalogs'
    other fixes, then the investigated bugs without a fix."""
    from torchfix_core._known_bugs import KNOWN_BUGS

    found: dict[str, KnownEntry] = {}
    if include_installed:
        for spec in installed_specs().values():
            found[spec.id] = _spec_entry(spec)
    for entry in catalog_entries():
        found.setdefault(entry.id, entry)
    for bug in KNOWN_BUGS:
        found.setdefault(
            bug["id"],
            KnownEntry(
                id=bug["id"],
                summary=bug["summary"],
                upstream=tuple(bug["upstream"]),
                signatures=tuple(bug["signatures"]),
                workaround=bug["workaround"],
                page="docs/investigated.md",
                source="investigated",
            ),
        )
    return list(found.values())


# -- reading failures -------------------------------------------------------------------------------
def _strip_prefixes(text: str) -> list[tuple[str, str | None]]:
    lines = []
    for raw in text.splitlines():
        rank = None
        m = _RANK_PREFIX.match(raw)
        while m:  # "[default0]:[rank0]: ..." carries two
            rank = m.group(1)
            raw = raw[m.end() :]
            m = _RANK_PREFIX.match(raw)
        lines.append((raw, rank))
    return lines


def failures_in_text(text: str, names: Iterable[str], where: str = "", rank: str | None = None) -> list[Failure]:
    """Each place in ``text`` where one of the exception class ``names`` is printed as
    ``[module.]Name: message``, with the message that follows (up to the next traceback block)."""
    wanted = sorted({n for n in names if n}, key=len, reverse=True)
    if not wanted:
        return []
    header = re.compile(
        r"(?:^|(?<=[\s'\"(\[]))(?:[A-Za-z_][\w]*\.)*(" + "|".join(map(re.escape, wanted)) + r"):(?: |$)"
    )
    lines = _strip_prefixes(text)
    found: list[Failure] = []
    block_start: dict[str | None, int] = {}  # rank -> first "Traceback" line of its open chain
    headers: dict[str | None, list[int]] = {}  # rank -> indices of its exception headers so far
    previous: dict[str | None, str] = {}  # rank -> its last non-blank line
    in_note: dict[str | None, bool] = {}  # rank -> inside one of torchfix's own notes
    for i, (line, line_rank) in enumerate(lines):
        if line.startswith(HEADER):  # torchfix's own note quotes the failure: not a second failure
            in_note[line_rank] = True
            continue
        if in_note.get(line_rank):
            if line.startswith("  "):
                continue
            in_note[line_rank] = False
        if line.startswith("Traceback (most recent call last):"):
            # a chained exception's block keeps its chain's first block as the start
            if not (previous.get(line_rank, "").startswith(_CHAIN_LINES) and line_rank in block_start):
                block_start[line_rank] = i
        if line.strip():
            previous[line_rank] = line
        m = header.search(line)
        if not m:
            continue
        body = [line[m.end() :]]
        size = len(body[0])
        for follow, follow_rank in lines[i + 1 : i + MAX_MESSAGE_LINES]:
            if _BLOCK_END.match(follow) or (line_rank is not None and follow_rank not in (None, line_rank)):
                break
            if header.search(follow):
                break
            body.append(follow)
            size += len(follow) + 1
            if size > MAX_MESSAGE_CHARS:
                break
        start = m.start(1) if m.start() == m.start(1) else m.start()
        exception = line[start : m.end(1)].lstrip(" '\"([")
        start_line = block_start.get(line_rank)
        frames: list[str] = []
        if start_line is not None and i - start_line <= MAX_TRACEBACK_LINES:  # the traceback and the lines before it
            earlier = [h for h in headers.get(line_rank, ()) if h < start_line]  # another failure's lines stay out
            lead = max(start_line - CONTEXT_LEAD_LINES, earlier[-1] + 1 if earlier else 0)
            frames = [f for f, r in lines[lead:i] if r == line_rank]
        headers.setdefault(line_rank, []).append(i)
        found.append(Failure(exception, "\n".join(body).rstrip(), where, rank or line_rank, (), "\n".join(frames)))
    return found


def _elastic_error(data: Any) -> str | None:
    """The traceback (or message) of a torchelastic error file, or None if ``data`` is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), (dict, str)):
        return None
    message = data["message"]
    if isinstance(message, str):
        return message
    extra = message.get("extraInfo") if isinstance(message.get("extraInfo"), dict) else {}
    text = extra.get("py_callstack") or message.get("message")
    return text if isinstance(text, str) else None


def read_source(name: str, stdin: Any = None) -> tuple[str, str | None]:
    """``(text, rank)`` of one input: a file (``-`` is standard input); a torchelastic error file
    is turned into its traceback, its rank taken from its ``<local_rank>/error.json`` folder.
    Raises ``OSError`` / ``UnicodeDecodeError`` for an unreadable file (the caller reports it)."""
    if name == "-":
        text = (stdin or sys.stdin).read()
        rank = None
    else:
        path = Path(name)
        text = path.read_text(encoding="utf-8", errors="strict")
        rank = path.parent.name if path.parent.name.isdigit() else None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            elastic = _elastic_error(json.loads(stripped))
        except ValueError:
            elastic = None
        if elastic is not None:
            return elastic, rank
    return text, rank


def failures_in_exception(exc: BaseException) -> list[Failure]:
    """The exception and every exception chained to it (``__cause__``, ``__context__``), once each."""
    out: list[Failure] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        cls = type(current)
        try:
            message = str(current)
        except Exception:  # noqa: BLE001 - a broken __str__ must not break the diagnosis
            message = ""
        name = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
        try:
            import traceback

            frames = "".join(traceback.format_tb(current.__traceback__))
        except Exception:  # noqa: BLE001
            frames = ""
        out.append(Failure(name, message, "this process", None, tuple(c.__name__ for c in cls.__mro__), frames))
        todo += [current.__cause__, current.__context__]
    return out


# -- matching ---------------------------------------------------------------------------------------
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def match_failures(failures: Iterable[Failure], entries: Sequence[KnownEntry]) -> list[Match]:
    """Each (entry, failure) pair whose signature matches, first signature of an entry only."""
    matches: list[Match] = []
    for failure in failures:
        names = set(failure.names())
        for entry in entries:
            for signature in entry.signatures:
                exception, pattern = signature.get("exception"), signature.get("message")
                if not exception or not pattern or exception.rsplit(".", 1)[-1] not in names:
                    continue
                regex = _compiled(pattern)
                if regex is None or not regex.search(failure.message):
                    continue
                context = signature.get("context")
                if context:
                    frames = _compiled(context)
                    if frames is None or not frames.search(failure.traceback):
                        continue
                matches.append(Match(entry, signature, failure))
                break
    return matches


def bad_patterns(entries: Sequence[KnownEntry]) -> list[str]:
    """``id: pattern (error)`` for every signature pattern that does not compile."""
    out = []
    for entry in entries:
        for signature in entry.signatures:
            for field in ("message", "context"):
                pattern = signature.get(field)
                if pattern:
                    try:
                        re.compile(pattern)
                    except re.error as exc:
                        out.append(f"{entry.id}: {field} {pattern!r} ({exc})")
    return out


def names_of(entries: Sequence[KnownEntry]) -> set[str]:
    return {s["exception"].rsplit(".", 1)[-1] for e in entries for s in e.signatures if s.get("exception")}


# -- the state of a matched fix here ----------------------------------------------------------------
def advice(entry: KnownEntry, row: Mapping[str, Any] | None, torch_installed: bool | None) -> tuple[str, str]:
    """``(state, what to do)`` for a matched entry: ``row`` is the fix's status row here (None if
    the fix is not installed)."""
    if not entry.is_fix:
        return "no fix", f"torchfix has no fix for this bug; workaround: {entry.workaround}"
    if row is None or row.get("state") == "not-installed":
        return "not-installed", (
            f"the fix is not installed here: pip install {entry.distribution} (or torchfix-all); it then "
            "acts on its own at import torch"
        )
    state, reason = str(row["state"]), str(row.get("reason", ""))
    ranges = ", ".join(f"{k} {v}" for k, v in entry.targets.items()) or "any"
    if state == "disabled":
        return state, f"installed but turned off here ({reason}): unset that variable to let the fix act"
    if state == "out-of-range":
        return state, (
            f"installed, but this environment is outside the range it was validated for ({ranges}): {reason}. "
            f"Upgrade the library where upstream fixed it, or set TORCHFIX_FORCE={entry.id} to apply it "
            "anyway (its probe still decides)"
        )
    if state == "not-needed":
        return state, (
            f"installed; its probe says this environment does not have the bug ({reason}). If the failure "
            "came from this environment, it is a new variant: report it"
        )
    if state == "failed":
        return state, f"installed, but it failed to apply here ({reason}): report it with `torchfix-doctor --json`"
    if state in ("applied", "pending"):
        when = "is active" if state == "applied" else "is installed and will apply when its modules are imported"
        return state, (
            f"the fix {when} here ({reason}). Was it active when this failure happened? Then this is a new "
            f"variant of the bug: report it with the traceback, `torchfix-doctor --json` and the torch version "
            f"({DIAGNOSIS_PAGE}, 'Reporting a new variant')"
        )
    if torch_installed is False:
        return state, f"installed ({reason}); torch is not installed here, so its range and probe cannot be judged"
    return state, reason


def describe(entry: KnownEntry, state: str, todo: str, seen: Sequence[str] = (), when: str = "") -> list[str]:
    """The lines shown for one matched entry (doctor explain and the uncaught-exception note);
    ``seen`` are lines saying where the failure was seen, ``when`` the signature's condition."""
    lines = [f"{HEADER} known bug: {entry.summary}", *(f"  {line}" for line in seen)]
    if when:
        lines.append(f"  this message means this bug when: {when}")
    for link in entry.upstream[:2]:
        lines.append(f"  upstream: {link}")
    if entry.is_fix:
        lines.append(f"  fix: {entry.id} (pip: {entry.distribution}); here: {state}")
    lines.append(f"  {todo}.")
    lines.append(f"  details: {entry.page} (torchfix repository)")
    return lines


# -- in process: the note after an uncaught exception --------------------------------------------------
_noted: set[int] = set()


def diagnose(exc: BaseException) -> str | None:
    """The note for an exception with a known signature (None if nothing matches). Uses the live
    states of this process (no trigger is imported, no spec beyond the installed ones is loaded)."""
    from torchfix_core import _registry

    entries = known_entries()
    matches = match_failures(failures_in_exception(exc), entries)
    if not matches:
        return None
    rows = {row.id: row.as_dict() for row in _registry.status()}
    lines: list[str] = []
    for fix_id in dict.fromkeys(m.entry.id for m in matches):
        match = next(m for m in matches if m.entry.id == fix_id)
        state, todo = advice(match.entry, rows.get(fix_id), None)
        lines += describe(
            match.entry, state, todo, [f"seen: {match.failure.headline()}"], match.signature.get("when", "")
        )
    lines.append(f"{HEADER} (this note: TORCHFIX_EXPLAIN=0 turns it off; the exception above is unchanged)")
    return "\n".join(lines)


def print_diagnosis(exc: BaseException, stream: Any = None) -> None:
    """Print :func:`diagnose`'s note once per exception on stderr; never raises."""
    try:
        if id(exc) in _noted:
            return
        _noted.add(id(exc))
        note = diagnose(exc)
        if note:
            print(note, file=stream or sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - the note must never add a failure of its own
        pass


def iter_failures(sources: Iterable[tuple[str, str, str | None]], names: Iterable[str]) -> Iterator[Failure]:
    """Failures of ``(where, text, rank)`` inputs."""
    wanted = list(names)
    for where, text, rank in sources:
        yield from failures_in_text(text, wanted, where, rank)
