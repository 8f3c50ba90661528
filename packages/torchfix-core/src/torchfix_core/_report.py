"""The per-run report: each fix's state and what it did in this process (its tally).

* :func:`report` (``torchfix_core.report()``): this process's report, a JSON-ready dict.
* ``TORCHFIX_REPORT=<dir>``: activation registers :func:`write_at_exit`, which writes
  ``<dir>/torchfix-report-rank<R>-pid<P>.json`` when the interpreter exits (the rank from
  ``RANK``, else ``SLURM_PROCID``, ``OMPI_COMM_WORLD_RANK``, ``LOCAL_RANK``; ``na`` without one).
  A directory that cannot be written gets one line on stderr, never an exception.
* ``torchfix-doctor report DIR``: :func:`main` summarises a job's files, per fix: the states seen,
  the ranks, and every event summed over the ranks. A file that cannot be read or is not a report
  is listed as such (exit status 2), never skipped silently.

Imports nothing heavy; reading the tallies never imports a fix's implementation.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, cast

FILE_GLOB = "torchfix-report-*.json"
FORMAT = "torchfix-report/1"
_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "LOCAL_RANK")


def rank() -> str | None:
    """This process's rank from the usual launcher variables, or None."""
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return value
    return None


def report() -> dict[str, Any]:
    """Every installed fix's state and reason, with its events (counts and details) in this process.

    A fix that never acted shows its declared events at 0 (or none, if its implementation was
    never imported: it cannot have acted)."""
    from torchfix_core import _registry
    from torchfix_core.tallies import tallies
    from torchfix_core.version import __version__

    counted = tallies()
    fixes = []
    for row in _registry.status():
        data = counted.get(row.id)
        events = data.as_dict() if data is not None else {"events": {}, "details": {}}
        acted = sum(cast("dict[str, int]", events["events"]).values())
        fixes.append(
            {
                "id": row.id,
                "state": str(row.state),
                "reason": row.reason,
                "distribution": row.distribution,
                "version": row.version,
                "acted": acted,
                **events,
            }
        )
    torch = sys.modules.get("torch")
    return {
        "format": FORMAT,
        "torchfix_core": __version__,
        "torch": str(getattr(torch, "__version__", "")) or None,
        "pid": os.getpid(),
        "rank": rank(),
        "world_size": os.environ.get("WORLD_SIZE"),
        "host": socket.gethostname(),
        "argv": list(sys.argv),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "fixes": fixes,
    }


def write(directory: str | os.PathLike[str]) -> Path:
    """Write :func:`report` into ``directory`` (created if missing); returns the file. Atomic:
    readers never see half a file."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"torchfix-report-rank{rank() or 'na'}-pid{os.getpid()}.json"
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(report(), indent=1), encoding="utf-8")
    os.replace(partial, target)
    return target


def write_at_exit() -> None:
    """The ``atexit`` callback of ``TORCHFIX_REPORT``: never raises."""
    directory = os.environ.get("TORCHFIX_REPORT", "").strip()
    if not directory:
        return
    try:
        write(directory)
    except Exception as exc:  # noqa: BLE001 - exiting must not fail because of the report
        print(
            f"[torchfix] TORCHFIX_REPORT={directory!r}: could not write the report: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )


def summarise(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The job's summary: per fix, the states seen (state -> ranks), the ranks that acted, and the
    events summed over every file; plus the files that could not be read."""
    folder = Path(directory)
    problems: dict[str, str] = {}
    files = sorted(folder.glob(FILE_GLOB)) if folder.is_dir() else []
    if not folder.is_dir():
        problems[str(folder)] = "not a directory"
    elif not files:
        problems[str(folder)] = f"no {FILE_GLOB} file in it (was TORCHFIX_REPORT set, and did the processes exit?)"
    fixes: dict[str, dict[str, Any]] = {}
    processes = []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            who = data["rank"] if data["rank"] is not None else f"pid {data['pid']}"
            rows = list(data["fixes"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems[str(path)] = f"{type(exc).__name__}: {exc}"
            continue
        processes.append({"file": path.name, "rank": data["rank"], "pid": data["pid"], "torch": data["torch"]})
        for row in rows:
            fix = fixes.setdefault(row["id"], {"states": {}, "acted_on": [], "events": {}})
            fix["states"].setdefault(row["state"], []).append(str(who))
            if row.get("acted"):
                fix["acted_on"].append(str(who))
            for event, count in row.get("events", {}).items():
                fix["events"][event] = fix["events"].get(event, 0) + int(count)
    return {"directory": str(folder), "processes": processes, "problems": problems, "fixes": fixes}


def render(summary: dict[str, Any]) -> str:
    lines = [f"torchfix report of {summary['directory']}: {len(summary['processes'])} process file(s)"]
    for name, problem in summary["problems"].items():
        lines.append(f"  could not use {name}: {problem}")
    for fix_id, fix in sorted(summary["fixes"].items()):
        states = "; ".join(f"{state} on {', '.join(who)}" for state, who in sorted(fix["states"].items()))
        acted = f"acted on {', '.join(fix['acted_on'])}" if fix["acted_on"] else "never acted"
        events = ", ".join(f"{event} x{count}" for event, count in sorted(fix["events"].items()) if count) or "none"
        lines.append(f"{fix_id}: {states}; {acted}; events: {events}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``torchfix-doctor report DIR [--json]``: exit 0, or 2 when a file could not be used."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="torchfix-doctor report", description="summarise a job's TORCHFIX_REPORT files"
    )
    parser.add_argument("directory")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = parser.parse_args(argv)
    summary = summarise(args.directory)
    print(json.dumps(summary, indent=2) if args.json else render(summary))
    return 2 if summary["problems"] else 0
