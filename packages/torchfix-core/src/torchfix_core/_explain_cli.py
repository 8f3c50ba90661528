"""``torchfix-doctor explain [FILE ...|-]``: name the known bugs in logs and tracebacks.

Reads each input (a log of one or several ranks, a traceback, torchelastic's per-rank
``error.json``; ``-`` or no argument reads standard input), finds every exception whose class and
message match a known signature (:mod:`torchfix_core._explain`), and prints per matched bug: the
bug and its upstream link, the fix and its distribution, the fix's state in this environment and
what to do, the ranks and inputs where it was seen, and the docs page.

The states come from this environment: with torch importable, as ``torchfix-doctor`` decides them
(the pending fixes' trigger modules are imported, which compiles nothing; ``--no-resolve`` skips
that); without torch, from the installed fixes and the ``TORCHFIX_*`` variables alone.

Exit status: 0 when at least one known bug matched, 1 when none did, 2 when an input could not be
read (the others are still explained) or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from torchfix_core import _explain

#: doctor's report of this environment (:func:`torchfix_core._doctor.collect`), passed in by doctor,
#: which dispatches the subcommand (so that this module does not import doctor back)
Collect = Callable[..., dict[str, Any]]

EXIT_MATCHED, EXIT_NO_MATCH, EXIT_BAD_INPUT = 0, 1, 2


def _rows(collect: Collect, resolve: bool) -> tuple[dict[str, dict[str, Any]], bool]:
    """fix id -> status row here (from doctor's ``collect``), and whether torch is installed."""
    from torchfix_core import _registry

    report = collect(resolve=resolve)
    rows = {row["id"]: row for row in report["fixes"]}
    torch_installed = bool(report["torch"]["installed"])
    if not torch_installed:
        # nothing was activated: the environment alone says which installed fixes are off
        settings = _registry.settings()
        for fix_id, row in rows.items():
            if row["state"] == "not-installed":
                continue
            disabled, why = settings.is_disabled(fix_id)
            row["state"], row["reason"] = (
                ("disabled", why) if disabled else ("installed", "torch is not installed here")
            )
    return rows, torch_installed


def explain(sources: list[str], collect: Collect, resolve: bool = True, stdin: Any = None) -> dict[str, Any]:
    """The explain report of ``sources`` (file names, ``-`` for stdin) as a JSON-ready dict; the
    states come from ``collect`` (doctor's report)."""
    entries = _explain.known_entries()
    names = _explain.names_of(entries)
    unreadable: dict[str, str] = {}
    failures: list[_explain.Failure] = []
    for name in sources:
        try:
            text, rank = _explain.read_source(name, stdin)
        except (OSError, UnicodeDecodeError) as exc:
            unreadable[name] = f"{type(exc).__name__}: {exc}"
            continue
        failures += _explain.failures_in_text(text, names, "stdin" if name == "-" else name, rank)
    matches = _explain.match_failures(failures, entries)
    rows, torch_installed = _rows(collect, resolve) if matches else ({}, None)
    found: list[dict[str, Any]] = []
    for entry_id in dict.fromkeys(m.entry.id for m in matches):
        mine = [m for m in matches if m.entry.id == entry_id]
        entry = mine[0].entry
        state, todo = _explain.advice(entry, rows.get(entry_id), torch_installed)
        found.append(
            {
                "id": entry.id,
                "kind": "fix" if entry.is_fix else "investigated",
                "summary": entry.summary,
                "upstream": list(entry.upstream),
                "distribution": entry.distribution or None,
                "state": state,
                "advice": todo,
                "page": entry.page,
                "known_from": entry.source,
                "signature": dict(mine[0].signature),
                "seen": [
                    {"where": m.failure.where, "rank": m.failure.rank, "error": m.failure.headline()} for m in mine
                ],
            }
        )
    return {
        "inputs": sources,
        "unreadable": unreadable,
        "failures_read": len(failures),
        "torch_installed": torch_installed,
        "family_catalog": _explain.has_catalog(),
        "matches": found,
    }


def render(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for name, error in report["unreadable"].items():
        lines.append(f"{_explain.HEADER} could not read {name}: {error}")
    for match in report["matches"]:
        entry = _explain.KnownEntry(
            id=match["id"],
            summary=match["summary"],
            upstream=tuple(match["upstream"]),
            signatures=(),
            distribution=match["distribution"] or "",
            page=match["page"],
        )
        ranks = sorted({s["rank"] for s in match["seen"] if s["rank"] is not None}, key=int)
        places = sorted({s["where"] for s in match["seen"]})
        where = f"{len(match['seen'])} time(s) in {', '.join(places)}"
        if ranks:
            where += f", ranks {', '.join(ranks)}"
        seen = [f"seen: {match['seen'][0]['error']}", f"where: {where}"]
        lines += _explain.describe(entry, match["state"], match["advice"], seen, match["signature"].get("when", ""))
        lines.append("")
    if not report["matches"]:
        lines.append(
            f"{_explain.HEADER} no known bug matched ({report['failures_read']} exception(s) of a known kind read). "
            f"What is matched: {_explain.DIAGNOSIS_PAGE}."
        )
    if not report["family_catalog"]:
        lines.append(
            f"{_explain.HEADER} no family catalog is installed: only the installed fixes and the investigated bugs "
            "are known; `pip install torchfix-all` (it needs no torch) adds the signatures of every fix."
        )
    return "\n".join(lines).rstrip()


def main(argv: list[str], collect: Collect) -> int:
    """``torchfix-doctor explain ARGV``; ``collect`` is doctor's report of this environment."""
    parser = argparse.ArgumentParser(prog="torchfix-doctor explain", description=__doc__.splitlines()[0])
    parser.add_argument(
        "inputs", nargs="*", default=["-"], help="log files, tracebacks or error.json files; - is stdin"
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("--no-resolve", action="store_true", help="do not import pending fixes' trigger modules")
    args = parser.parse_args(argv)
    report = explain(list(args.inputs), collect, resolve=not args.no_resolve)
    print(json.dumps(report, indent=2) if args.json else render(report))
    if report["unreadable"]:
        return EXIT_BAD_INPUT
    return EXIT_MATCHED if report["matches"] else EXIT_NO_MATCH
