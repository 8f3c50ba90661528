"""Write ``docs/compatibility.md`` from the recorded matrix cells, or check it against the fixes' metadata.

    python scripts/compatibility.py --write   # after any matrix session(s) (reads .matrix-results/)
    python scripts/compatibility.py --check   # CI: fail if the page is stale

Cells are recorded in the repository, one JSON file each under ``docs/results/matrix/`` (what the
page shows of that cell: commit, versions, each fix's state and reason, test counts, notes), so that
the page can be regenerated after re-running only some cells (a new fix, one torch release):
``--write`` first records every cell found under ``.matrix-results/`` (replacing that cell's file),
then renders the page from all recorded cells. A fix that was not installed in an older cell shows
``absent: not in this run`` there, and ``--check`` fails, until that cell is re-run.

A matrix run leaves one folder per cell under ``.matrix-results/`` (``torch-2.12.0-py3.11``, ...;
``te-2.18.0``, ... from the ``te(VERSION)`` sessions, rendered as a TransformerEngine table;
``magi-<torch>`` from the ``magi`` sessions, a MagiCompiler table; ``verify-<cpu|gpu>-<torch>``:
``verify.json`` (``torchfix-doctor verify --all --json`` on that machine), the "Verified" table; ``twin-<release>`` from the ``twin``
sessions, a patch release compared with its base, ``twin.json`` from scripts/release_twin.py):
``doctor.json`` (``python -m torchfix_core --json`` in that environment), ``commit.txt``, one JUnit
report per test directory and, optionally, ``notes.txt`` (shown under the table: what a reader must
know about that cell, e.g. a run cut short); ``combinations/`` holds the combination suite's report. ``--write`` turns them into
a fix x torch table (the probe's decision and the fix package's test result per cell) and embeds
the fixes' metadata it was made against. ``--check`` recomputes that metadata from the installed
fix packages (id, distribution version, validated ranges) and from ``noxfile.py`` (torch and TE matrices)
and fails when it differs from the embedded copy, when a patch release of ``PATCH_TWINS`` has no
recorded twin check or is not its base's twin (:func:`twin_findings`), or when a recorded state contradicts a validated
range (``out-of-range`` inside the range, or anything else outside it): then the matrix must be
re-run. Needs torchfix-core and every fix package importable (their ``package`` modules are data).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path
from typing import Any

from family import ROOT, fix_entry_points, fix_packages, module_name
from release_twin import VERSION_FILE

RESULTS = ROOT / ".matrix-results"
RECORDED = ROOT / "docs" / "results" / "matrix"
PAGE = ROOT / "docs" / "compatibility.md"
MARK = re.compile(r"<!-- torchfix-compatibility-metadata\n(.*?)\n-->", re.S)


def noxfile_constant(name: str) -> Any:
    """The literal value noxfile.py assigns to ``name`` at its top level (``TORCH_MATRIX``,
    ``PATCH_TWINS``, ...), read without importing nox."""
    for node in ast.parse((ROOT / "noxfile.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"noxfile.py: {name} not found")


def metadata() -> dict[str, Any]:
    """What the page must agree with: the fixes as their packages declare them (every
    ``torchfix.fixes`` entry point of every fix package), and the matrix."""
    fixes = []
    for package in fix_packages():
        version = importlib.import_module(f"{module_name(package)}.version").__version__
        for value in fix_entry_points(package).values():
            module, _, attr = value.partition(":")
            spec = getattr(importlib.import_module(module), attr)
            fixes.append(
                {
                    "id": spec.id,
                    "package": package.name,
                    "version": version,
                    "targets": dict(sorted(spec.targets.items())),
                }
            )
    return {
        "torch_matrix": noxfile_constant("TORCH_MATRIX"),
        "patch_twins": noxfile_constant("PATCH_TWINS"),
        "te_matrix": noxfile_constant("TE_VERSIONS"),
        "fixes": sorted(fixes, key=lambda f: f["id"]),
    }


def in_range(spec: str, version: str) -> bool | None:
    """Whether ``version`` is inside ``spec``, by torchfix-core's own range judgement (the one the
    registry gates with); None when that judgement is ambiguous (the probe would decide)."""
    from torchfix_core._versions import Verdict, judge

    verdict, _ = judge(version, spec)
    return None if verdict is Verdict.AMBIGUOUS else verdict is Verdict.IN_RANGE


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, 0))
        seconds += float(suite.get("time", 0) or 0)
    total["passed"] = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    total["seconds"] = round(seconds)
    return total


def selection_summary(path: Path) -> dict[str, Any] | None:
    """What a combination cell's ``selection.json`` says: fixes, subsets, pairs run with a
    reproduction, channels, co-existence subsets and seconds."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return {
        "fixes": data.get("fixes"),
        "subsets": len(data.get("subsets", [])),
        "channels": len(data.get("channels", {})),
        "coexistence": data.get("coexistence"),
        "hidden": sorted(k for k, row in data.get("patch_points", {}).items() if row.get("hidden")),
    }


def read_cell(folder: Path) -> dict[str, Any]:
    doctor = json.loads((folder / "doctor.json").read_text()) if (folder / "doctor.json").is_file() else {}
    reports = {p.stem: junit_counts(p) for p in sorted(folder.glob("*.xml"))}
    commit = folder / "commit.txt"
    notes = folder / "notes.txt"
    return {
        "commit": commit.read_text().strip() if commit.is_file() else "?",
        "torch": (doctor.get("torch") or {}).get("version"),
        "python": doctor.get("python"),
        "states": {f["id"]: {"state": f["state"], "reason": f["reason"]} for f in doctor.get("fixes", [])},
        "reports": reports,
        "notes": " ".join(notes.read_text().split()) if notes.is_file() else "",
        **({"selection": summary} if (summary := selection_summary(folder / "selection.json")) else {}),
        **({"run": json.loads((folder / "run.json").read_text())} if (folder / "run.json").is_file() else {}),
        **({"twin": json.loads((folder / "twin.json").read_text())} if (folder / "twin.json").is_file() else {}),
    }


def read_verify_cell(folder: Path) -> dict[str, Any]:
    """A verify cell (``.matrix-results/verify-<cpu|gpu>-<torch>/``): ``verify.json`` (``torchfix-doctor
    verify --all --json`` on that machine), ``commit.txt`` and optional ``notes.txt``. Each fix's state is the
    probe's decision there; ``verify`` keeps each row's verdict, the outcome of each run and its
    measure, and the seconds."""
    data = json.loads((folder / "verify.json").read_text())
    commit, notes = folder / "commit.txt", folder / "notes.txt"

    def run(record: dict[str, Any] | None) -> dict[str, str] | None:
        if record is None:
            return None
        if "broke" in record:
            return {"result": "broke", "measure": str(record["broke"])[:300]}
        outcome = record.get("outcome", {})
        return {"result": outcome.get("result", "?"), "measure": outcome.get("measure") or outcome.get("detail", "")}

    return {
        "commit": commit.read_text().strip() if commit.is_file() else "?",
        "torch": data.get("torch"),
        "python": data.get("python"),
        "device": data.get("device") or "?",
        "states": {row["id"]: {"state": row["state"], "reason": row["verdict"]} for row in data["rows"]},
        "verify": {
            row["id"]: {
                "verdict": row["verdict"],
                "without": run(row.get("without")),
                "with": run(row.get("with")),
                "seconds": row.get("seconds", 0),
            }
            for row in data["rows"]
        },
        "reports": {},
        "notes": " ".join(notes.read_text().split()) if notes.is_file() else "",
    }


def record_cells() -> list[str]:
    """Record every cell under ``.matrix-results/`` as ``docs/results/matrix/<cell>.json``; returns their names.

    A cell that ran only some test directories (``MATRIX_ONLY``, see ``noxfile.py``: a partial
    re-run) keeps the recorded reports of the directories it did not run; its commit then reads
    ``<old>+<new>`` and its notes must say what ran (``notes.txt``). A partial cell may hold only
    ``doctor.json`` (every fix's state re-read, no test re-run)."""
    RECORDED.mkdir(parents=True, exist_ok=True)
    names = []
    for folder in sorted(p for p in RESULTS.glob("*") if p.is_dir()) if RESULTS.is_dir() else []:
        if (folder / "verify.json").is_file():  # a verify cell: torchfix-doctor verify --all --json
            (RECORDED / f"{folder.name}.json").write_text(
                json.dumps(read_verify_cell(folder), indent=1, sort_keys=True) + "\n"
            )
            names.append(folder.name)
            continue
        partial = (folder / "partial.txt").is_file()
        ran = any(folder.glob("*.xml")) or (folder / "twin.json").is_file()
        if not ran and not (partial and (folder / "doctor.json").is_file()):
            continue
        cell = read_cell(folder)
        path = RECORDED / f"{folder.name}.json"
        if partial and path.is_file():
            cell = merge_partial(json.loads(path.read_text()), cell)
        path.write_text(json.dumps(cell, indent=1, sort_keys=True) + "\n")
        names.append(folder.name)
    return names


def merge_partial(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A partial re-run over a recorded cell: the new run's states, versions and reports, plus the
    old reports of the test directories the new run did not run."""
    kept = {name: counts for name, counts in old["reports"].items() if name not in new["reports"]}
    if not kept:
        return new
    # idempotent: writing the page again from the same partial cell adds no commit or note twice
    commits = [c for c in (*old["commit"].split("+"), new["commit"]) if c and c != "?"]
    old_notes, new_notes = old.get("notes", ""), new.get("notes", "")
    notes = old_notes if new_notes and new_notes in old_notes else " ".join(n for n in (old_notes, new_notes) if n)
    return {
        **new,
        "reports": {**kept, **new["reports"]},
        "commit": "+".join(dict.fromkeys(commits)) or "?",
        "notes": notes,
    }


def load_cells(prefix: str) -> dict[str, dict[str, Any]]:
    """The recorded cells whose name starts with ``prefix`` (``torch-``, ``te-``, ``magi-``, ``combinations``)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(RECORDED.glob(f"{prefix}*.json"))}


def describe(counts: dict[str, int] | None) -> str:
    if counts is None:
        return "not run"
    text = f"{counts['passed']} passed"
    if counts["skipped"]:
        text += f", {counts['skipped']} skipped"
    bad = counts["failures"] + counts["errors"]
    return text + (f", **{bad} failed**" if bad else "")


def test_minutes(cell: dict[str, Any]) -> str:
    """The minutes a cell's test runs took (the sum of its JUnit reports' times: one process at a time;
    installing torch and the packages not counted); ``?`` where a recorded report has no time."""
    reports = cell["reports"].values()
    if not reports or any("seconds" not in counts for counts in reports):
        return "?"
    return f"{sum(counts['seconds'] for counts in reports) / 60:.0f}"


def render(meta: dict[str, Any]) -> str:
    cells = load_cells("torch-")
    matrix = meta["torch_matrix"]
    lines = [
        "# Compatibility",
        "",
        "Generated by `scripts/compatibility.py --write` from a matrix run (`nox -s matrix`); do not edit by",
        "hand. CI (`nox -s tests`) runs `scripts/compatibility.py --check`, which fails when the fixes'",
        "metadata (ids, versions, validated ranges) or the torch matrix changed since this page was made.",
        "",
        f"Made {date.today().isoformat()} at commit {git_commit() or '?'} from {len(cells)} matrix cells (CPU machine; the registry's",
        "CUDA builds of torch run on the CPU). Each cell: the probe's decision in that environment, then the",
        "fix package's own test suite (`-m 'not gpu and not slow'`), at the commit named in its column.",
        'GPU cells (each fix\'s declared reproduction run without and with it on a GPU): "On a GPU" below;',
        "more GPU results on each fix's page in `docs/fixes/`.",
        "",
        "States: **applied** (bug present, patched), *not-needed* (the probe found the bug absent), "
        "out-of-range (torch outside the validated range: not probed), not-installed (a library the fix "
        "patches is absent).",
        "",
    ]
    for python in sorted({c.split("-py")[1] for c in cells} | {"3.11"}):
        columns = [v for v in matrix if f"torch-{v}-py{python}" in cells]
        if not columns:
            continue
        lines += [f"## Python {python}", ""]
        lines.append("| fix | " + " | ".join(f"torch {v}" for v in columns) + " |")
        lines.append("|---|" + "---|" * len(columns))
        lines.append(
            "| (commit tested) | " + " | ".join(f"`{cells[f'torch-{v}-py{python}']['commit']}`" for v in columns) + " |"
        )
        lines.append(
            "| (test minutes) | " + " | ".join(test_minutes(cells[f"torch-{v}-py{python}"]) for v in columns) + " |"
        )
        for fix in meta["fixes"]:
            lines.append(fix_row(fix, [cells[f"torch-{v}-py{python}"] for v in columns]))
        for extra in ("torchfix-core", "cross-package"):
            row = [f"{extra} tests"]
            for version in columns:
                row.append(describe(cells[f"torch-{version}-py{python}"]["reports"].get(extra)))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        lines += notes_lines({f"torch {v} / Python {python}": f"torch-{v}-py{python}" for v in columns})
    lines += render_verify(meta, load_cells("verify-"))
    lines += render_twins(meta, load_cells("twin-"), cells)
    te_cells = {name.removeprefix("te-"): cell for name, cell in load_cells("te-").items()}
    lines += render_te(meta, te_cells)
    magi_cells = {name.removeprefix("magi-"): cell for name, cell in load_cells("magi-").items()}
    lines += render_magi(meta, magi_cells)
    missing = [f"torch {v} / Python {p}" for p in ("3.11",) for v in matrix if f"torch-{v}-py{p}" not in cells]
    missing += [f"TransformerEngine {v}" for v in meta["te_matrix"] if v not in te_cells]
    if missing:
        lines += [
            "Not run in this matrix run: " + ", ".join(missing) + ". The default cell (torch "
            f"{matrix_default()}, Python 3.11) is what CI runs on every change (`nox -s tests`); each fix's page "
            "in `docs/fixes/` lists the direct (non-nox) test runs its authors made on the other releases.",
            "",
        ]
    lines += ["## Why each fix is in the state it is", ""]
    for fix in meta["fixes"]:
        lines.append(f"- `{fix['id']}` (validated for {', '.join(f'{k} {v}' for k, v in fix['targets'].items())}):")
        seen: dict[str, list[str]] = {}
        all_cells = [*cells.items(), *((f"te-{v}", c) for v, c in te_cells.items())]
        for name, cell in [*all_cells, *((f"magi-{v}", c) for v, c in magi_cells.items())]:
            row = cell["states"].get(fix["id"])
            if row:
                seen.setdefault(f"{row['state']}: {row['reason']}", []).append(name)
        for reason, where in seen.items():
            lines.append(f"  - {', '.join(sorted(where, key=release_order))}: {reason}")
    lines += ["", "## Combinations", ""]
    lines += render_combinations(load_cells("combinations"))
    lines += ["", "<!-- torchfix-compatibility-metadata", json.dumps(meta, indent=1, sort_keys=True), "-->", ""]
    return "\n".join(lines)


def twin_findings(meta: dict[str, Any], release: str, twins: dict[str, Any], cells: dict[str, Any]) -> list[str]:
    """Why the recorded twin check of the patch release ``release`` does not let its base's column
    stand for it (empty: it does): no record, a Python file other than ``version.py`` differs, or a
    fix decides otherwise than in the base's recorded Python 3.11 cell (or is missing in either)."""
    base = meta["patch_twins"][release]
    twin = twins.get(f"twin-{release}")
    if twin is None or "twin" not in twin:
        return [f'torch {release} has no recorded twin check: run `nox -s "twin({release})"`']
    found = []
    if not twin["twin"]["twin"]:
        differing = ", ".join(p for p in twin["twin"]["python_differing"] if p != VERSION_FILE)
        found.append(
            f"torch {release}'s Python sources differ from {base}'s ({differing}): make it a TORCH_MATRIX column"
        )
    base_cell = cells.get(f"torch-{base}-py3.11")
    if base_cell is None:
        return [*found, f"torch {base} / Python 3.11, the base of {release}, has no recorded cell"]
    for fix_id, ours, theirs in decisions_apart(meta, twin, base_cell):
        found.append(f"fix {fix_id!r}: {ours or 'absent'} on torch {release}, {theirs or 'absent'} on {base}")
    return found


def decisions_apart(
    meta: dict[str, Any], cell: dict[str, Any], base_cell: dict[str, Any]
) -> list[tuple[str, str | None, str | None]]:
    """``(fix id, state in cell, state in base_cell)`` for every fix of the family whose recorded
    state differs between the two cells, or that either lacks (``None``)."""
    apart = []
    for fix in meta["fixes"]:
        ours = cell["states"].get(fix["id"], {}).get("state")
        theirs = base_cell["states"].get(fix["id"], {}).get("state")
        if ours is None or ours != theirs:
            apart.append((fix["id"], ours, theirs))
    return apart


#: a verify cell's verdict (``torchfix-doctor verify``) in a few words: (start of the verdict, shown)
VERDICT_WORDS = (
    ("repaired", "red without, green with"),
    ("the bug does not reproduce", "no bug without the fix"),
    ("the bug reproduces here, outside", "bug reproduces (outside the range)"),
    ("the bug did not show", "bug did not show here"),
    ("NOT REPAIRED", "**NOT REPAIRED**"),
    ("the bug reproduces although", "**bug reproduces although the probe says absent**"),
    ("reproduction broke", "**reproduction broke**"),
    ("skipped: the fix declares no reproduction", "no reproduction declared"),
    ("skipped: needs ", "skipped: needs {rest}"),
    ("skipped: cannot run here ", "cannot run: {rest}"),
    ("skipped: ", "skipped: {rest}"),
)


def verdict_words(verdict: str) -> str:
    """A verify cell's verdict shortened for the table (:data:`VERDICT_WORDS`); the rest of a
    ``skipped`` verdict is kept, cut to 60 characters, without its brackets."""
    kept_out = re.match(r"skipped: \S+ here \((.*)\)$", verdict)  # verify's "skipped: <state> here (why)"
    if kept_out:
        verdict = f"skipped: {kept_out.group(1)}"
    for start, shown in VERDICT_WORDS:
        if verdict.startswith(start):
            rest = verdict[len(start) :].strip().strip("()")
            return shown.format(rest=rest[:60] + ("..." if len(rest) > 60 else ""))
    return verdict[:60]


def render_verify(meta: dict[str, Any], verify_cells: dict[str, dict[str, Any]]) -> list[str]:
    """Every fix x the recorded verify cells (``verify-<machine>-<torch>``): the probe's state on that
    machine and what its declared reproduction showed without and with the fix; then the measures
    of the runs that showed the bug."""
    if not verify_cells:
        return []
    names = sorted(verify_cells, key=release_order)
    lines = [
        "## Verified",
        "",
        "`torchfix-doctor verify --all --json`, one machine per column (the device in its head: `cpu`, or",
        "the GPU): each fix's declared reproduction (`FixSpec.reproduction`) in fresh interpreters without",
        "and with the fix (only without where the probe keeps the fix out: not-needed, out-of-range), torch",
        "and torchfix installed from wheels (torchfix of the commit named). *red without, green with*: the",
        "bug showed without the fix and not with it; *cannot run*: the reproduction needs what that machine",
        "lacks (a GPU, a library).",
        "",
    ]
    lines.append(
        "| fix | "
        + " | ".join(f"torch {verify_cells[n]['torch'].split('+')[0]} ({verify_cells[n]['device']})" for n in names)
        + " |"
    )
    lines.append("|---|" + "---|" * len(names))
    lines.append("| (commit tested) | " + " | ".join(f"`{verify_cells[n]['commit']}`" for n in names) + " |")
    for fix in meta["fixes"]:
        row = [f"`{fix['id']}` {fix['version']}"]
        for name in names:
            state = verify_cells[name]["states"].get(fix["id"], {}).get("state")
            if state is None:
                row.append("absent: not in this run")
                continue
            verdict = verify_cells[name]["verify"][fix["id"]]
            shown = f"**{state}**" if state == "applied" else state
            seconds = f" ({verdict['seconds']:.0f} s)" if verdict.get("seconds") else ""
            row.append(f"{shown}: {verdict_words(verdict['verdict'])}{seconds}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    measures = []
    for name in names:
        cell = verify_cells[name]
        for fix_id, verdict in cell["verify"].items():
            without, with_fix = verdict.get("without"), verdict.get("with")
            if not without or without["result"] != "observed":
                continue
            text = f"- `{fix_id}`, torch {cell['torch']}: without the fix {without['measure']}"
            if with_fix:
                text += f"; with it {with_fix['measure']}"
            measures.append(text)
    if measures:
        lines += ["Measures of the runs that showed the bug:", "", *measures, ""]
    return lines + notes_lines({f"{verify_cells[n]['device']}, torch {verify_cells[n]['torch']}": n for n in names})


def render_twins(meta: dict[str, Any], twins: dict[str, dict[str, Any]], cells: dict[str, Any]) -> list[str]:
    """The patch releases of ``PATCH_TWINS``: what ``nox -s twin(<release>)`` found, and whether the
    base's column stands for each."""
    if not meta["patch_twins"]:
        return []
    lines = [
        "## Patch releases",
        "",
        '`nox -s "twin(<release>)"` (docs/design.md, "Patch releases"): a patch release whose Python files are its',
        "base's, all but `torch/version.py`, runs every patch point, probe and reproduction of the base's column;",
        "the check compares every file of the two wheels, and each fix's decision there with the base's Python 3.11 cell.",
        "",
        "| release | base | commit | Python files differing | other files differing | requirements changed | fixes deciding as on the base |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for release, base in sorted(meta["patch_twins"].items(), key=lambda item: release_order(item[0])):
        twin = twins.get(f"twin-{release}")
        problems = twin_findings(meta, release, twins, cells)
        if twin is not None and "twin" in twin:
            found = twin["twin"]
            python = f"{len(found['python_differing'])} of {found['python_files']}: " + (
                ", ".join(f"`{p}`" for p in found["python_differing"]) or "none"
            )
            others = f"{len(found['other_differing'])}" + (
                ": " + ", ".join(f"`{p}`" for p in found["other_differing"]) if found["other_differing"] else ""
            )
            requirements = "; ".join(f"`{old}` -> `{new}`" for old, new in found["requirements_changed"]) or "none"
            base_cell = cells.get(f"torch-{base}-py3.11", {"states": {}})
            same = len(meta["fixes"]) - len(decisions_apart(meta, twin, base_cell))
            lines.append(
                f"| torch {release} | torch {base} | `{twin['commit']}` | {python} | {others} | {requirements} | "
                f"{same} of {len(meta['fixes'])} |"
            )
        else:
            lines.append(f"| torch {release} | torch {base} | not run | | | | |")
        verdicts.append(
            f"- torch {release}: the torch {base} column stands for it."
            if not problems
            else f"- torch {release}: **not covered by torch {base}**: " + "; ".join(problems)
        )
    return [*lines, "", *verdicts, ""]


def render_combinations(combos: dict[str, dict[str, Any]]) -> list[str]:
    """The combination suite's runs: a table per kind (the selection per release, the power set)."""
    legacy = combos.pop("combinations", None)  # the suite before it selected subsets (five fixes)
    current = {n: c for n, c in combos.items() if c.get("selection")}
    older = {n: c for n, c in combos.items() if not c.get("selection")}
    lines: list[str] = []
    if current:
        lines += [
            '`nox -s "combinations(<torch>)"` (docs/design.md, "Combination suite"): per subset discovery, the '
            "co-existence of every selected subset and every pair, and each fix's reproduction (red without, green "
            "with) with the rest of the subset active: alone (recording what it reaches), in the full set, and in "
            "every pair with a channel. A row's channels are those its commit's suite derived: from commit f7a69bc "
            "on, from what each reproduction reached when it ran alone; before, from every module the full set's "
            "runs imported.",
            "",
            "| release | commit | fixes | subsets | channels | passed | minutes |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, cell in sorted(current.items(), key=by_release):
            summary, counts = cell["selection"], cell["reports"].get("combinations")
            minutes = combination_minutes(cell)
            lines.append(
                f"| {cell.get('torch') or name.split('-')[-1]} | `{cell['commit']}` | {summary['fixes']} | "
                f"{summary['subsets']} | {summary['channels']} | {describe(counts)} | {minutes} |"
            )
        lines.append("")
        noted = [
            f"- {c.get('torch') or n}: {c['notes']}" for n, c in sorted(current.items(), key=by_release) if c["notes"]
        ]
        lines += [*noted, ""] if noted else []
    for name, cell in sorted(older.items()):
        lines.append(
            f"- `{name}` (the suite before issue 25: subsets installed, reproductions with the rest of the subset "
            f"installed but switched off by the reproduction's own `TORCHFIX_DISABLE=all`), torch "
            f"{cell.get('torch') or '?'}, commit `{cell['commit']}`: {describe(cell['reports'].get('combinations'))}"
        )
    if legacy is not None:
        lines.append(
            f"- `combinations` (before the selection: every non-empty subset of the first five fixes, 31), torch "
            f"{matrix_default()}, commit `{legacy['commit']}`: {describe(legacy['reports'].get('combinations'))}"
        )
    if not lines:
        lines.append("The combination suite (`nox -s combinations(<torch>)`) was not part of this run.")
    return lines


def release_order(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key of a cell name with its numbers read as numbers: ``te-2.8.0`` < ``te-2.14.1``,
    ``torch-2.9.1-py3.11`` < ``torch-2.10.0-py3.11`` (text compares before numbers)."""
    return tuple((1, int(part)) if part.isdigit() else (0, part) for part in re.split(r"(\d+)", name) if part)


def by_release(item: tuple[str, Any]) -> tuple[tuple[int, int | str], ...]:
    """Sort key of a ``(cell name, cell)`` pair: :func:`release_order` of its name."""
    return release_order(item[0])


def combination_minutes(cell: dict[str, Any]) -> str:
    """A combination run's wall minutes and pytest workers (``run.json``, written by the nox session),
    else the sum of its JUnit times (one worker's runs), else ``?``."""
    run = cell.get("run") or {}
    if "wall_seconds" in run:
        workers = int(run.get("workers", 1))
        return f"{run['wall_seconds'] / 60:.0f} ({workers} worker{'s' if workers != 1 else ''})"
    counts = cell["reports"].get("combinations")
    return f"{counts['seconds'] / 60:.0f}" if counts and "seconds" in counts else "?"


def render_te(meta: dict[str, Any], te_cells: dict[str, dict[str, Any]]) -> list[str]:
    """The fixes that patch TransformerEngine x the TE releases of ``nox -s te(VERSION)``."""
    intro = [
        "`nox -s te(VERSION)`: the fix against TransformerEngine's real Python sources from the registry; TE's",
        "compiled parts (CUDA core library, torch extension) cannot run on a CPU machine and are replaced by the",
        "test stand-ins in packages/torchfix-fp8-recompute/tests/te_standins/ (which say what they mirror).",
    ]
    return library_table(
        meta, te_cells, "TransformerEngine", "transformer_engine", "te", meta["te_matrix"], intro, versions_row=True
    )


def render_magi(meta: dict[str, Any], magi_cells: dict[str, dict[str, Any]]) -> list[str]:
    """The fixes that patch MagiCompiler x the torch releases of the ``magi`` sessions."""
    intro = [
        "`nox -s magi` / `magi_torch(VERSION)`: the Magi adapters against MagiCompiler's real source (commit",
        "8e2e47c, not on the registry), on each torch release named below, CPU, multi-rank cases on gloo.",
    ]
    return library_table(meta, magi_cells, "MagiCompiler", "magi_compiler", "magi", meta["torch_matrix"], intro)


def library_table(
    meta: dict[str, Any],
    cells: dict[str, dict[str, Any]],
    title: str,
    library: str,
    prefix: str,
    versions: list[str],
    intro: list[str],
    versions_row: bool = False,
) -> list[str]:
    """A table of the fixes that patch ``library`` x the recorded cells ``<prefix>-<version>`` (columns
    headed ``transformer_engine 2.18.0`` for TE cells, ``torch 2.13.0`` for cells per torch release)."""
    fixes = [f for f in meta["fixes"] if library in f["targets"]]
    columns = [v for v in versions if v in cells]
    if not fixes or not columns:
        return []
    head = library if versions_row else "torch"
    lines = [f"## {title}", "", *intro, ""]
    lines.append("| fix | " + " | ".join(f"{head} {v}" for v in columns) + " |")
    lines.append("|---|" + "---|" * len(columns))
    lines.append("| (commit tested) | " + " | ".join(f"`{cells[v]['commit']}`" for v in columns) + " |")
    if versions_row:
        lines.append(
            "| (torch, Python) | "
            + " | ".join(f"{cells[v]['torch'] or '?'}, {cells[v]['python'] or '?'}" for v in columns)
            + " |"
        )
    lines += [fix_row(fix, [cells[v] for v in columns]) for fix in fixes]
    lines.append("")
    label = "TransformerEngine {}" if versions_row else f"{title} / torch {{}}"
    return lines + notes_lines({label.format(v): f"{prefix}-{v}" for v in columns})


def fix_row(fix: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """One fix's table row: its state and its package's test result in each cell."""
    row = [f"`{fix['id']}` {fix['version']}"]
    for cell in cells:
        state = cell["states"].get(fix["id"], {}).get("state")
        if state is None:  # the fix did not exist, or was not installed, when this cell ran
            row.append("absent: not in this run")
            continue
        shown = f"**{state}**" if state == "applied" else state
        row.append(f"{shown}: {describe(cell['reports'].get(fix['package']))}")
    return "| " + " | ".join(row) + " |"


def notes_lines(folders: dict[str, str]) -> list[str]:
    """``- <label>: <notes>`` for each recorded cell that has notes, then a blank line if any."""
    lines = []
    for label, name in folders.items():
        path = RECORDED / f"{name}.json"
        notes = json.loads(path.read_text()).get("notes", "") if path.is_file() else ""
        if notes:
            lines.append(f"- {label}: {notes}")
    return lines + [""] if lines else lines


def matrix_default() -> str:
    return str(noxfile_constant("DEFAULT_TORCH"))


def check(meta: dict[str, Any]) -> list[str]:
    """Reasons the page is stale (empty: up to date)."""
    if not PAGE.is_file():
        return [f"{PAGE.relative_to(ROOT)} is missing"]
    text = PAGE.read_text()
    match = MARK.search(text)
    if not match:
        return ["the page has no embedded metadata block"]
    recorded = json.loads(match.group(1))
    problems = []
    if load_cells("torch-") and _without_made_line(render(meta)) != _without_made_line(text):
        problems.append(
            f"the page differs from what the recorded cells ({RECORDED.relative_to(ROOT)}/) render: "
            "run `scripts/compatibility.py --write`"
        )
    if recorded != meta:
        old = {f["id"]: f for f in recorded.get("fixes", [])}
        new = {f["id"]: f for f in meta["fixes"]}
        for fix_id in sorted(old.keys() | new.keys()):
            if old.get(fix_id) != new.get(fix_id):
                problems.append(f"fix {fix_id!r}: page has {old.get(fix_id)}, packages declare {new.get(fix_id)}")
        for key in ("torch_matrix", "patch_twins", "te_matrix"):
            if recorded.get(key) != meta[key]:
                problems.append(f"{key.replace('_', ' ')}: page has {recorded.get(key)}, noxfile {meta[key]}")
    # no "absent" cell: every recorded torch cell ran every fix of the family (a new fix re-runs each
    # cell, at least partially: MATRIX_ONLY=<its package>)
    for name, cell in {**load_cells("torch-"), **load_cells("verify-")}.items():
        absent = sorted(f["id"] for f in meta["fixes"] if f["id"] not in cell["states"])
        if absent:
            problems.append(f"cell {name} has no run of {', '.join(absent)} (absent): re-run that cell")
    # every patch release the matrix covers by its base's column was checked to be the base's twin
    twins, torch_cells = load_cells("twin-"), load_cells("torch-")
    for release in meta["patch_twins"]:
        problems += twin_findings(meta, release, twins, torch_cells)
    # a recorded state must agree with the validated range of the library version it was recorded on
    # (columns are headed "torch 2.12.0" or "transformer_engine 2.18.0")
    for fix in meta["fixes"]:
        for line in text.splitlines():
            if not line.startswith(f"| `{fix['id']}` "):
                continue
            header = next(h for h in reversed(text[: text.index(line)].splitlines()) if h.startswith("| fix |"))
            columns = re.findall(r"(\w+) ([0-9][^ |]*)", header)
            states = [c.strip().split(":")[0].strip("*") for c in line.strip("|").split("|")[1:]]
            for (library, version), state in zip(columns, states):
                spec = fix["targets"].get(library)
                if not spec or state in ("not-installed", "absent"):
                    continue
                inside = in_range(spec, version)
                if inside is None:
                    continue
                if inside and state == "out-of-range" or not inside and state != "out-of-range":
                    problems.append(f"fix {fix['id']!r} on {library} {version}: recorded {state}, range {spec}")
    return problems


def _without_made_line(text: str) -> str:
    """The page without its "Made <date> at commit <sha>" line (which changes on every render)."""
    return re.sub(r"^Made \S+ at commit \S+ from", "Made from", text, count=1, flags=re.M)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="regenerate docs/compatibility.md")
    group.add_argument("--check", action="store_true", help="fail if docs/compatibility.md is stale")
    args = parser.parse_args(argv)
    meta = metadata()
    if args.write:
        recorded = record_cells()
        print(f"recorded {len(recorded)} cell(s) from {RESULTS.name}/: {', '.join(recorded) or 'none'}")
        if not load_cells("torch-"):
            print(f"no recorded cells under {RECORDED.relative_to(ROOT)}: run `nox -s matrix` first", file=sys.stderr)
            return 1
        PAGE.write_text(render(meta))
        print(f"wrote {PAGE.relative_to(ROOT)}")
        problems = check(meta)
    else:
        problems = check(meta)
    if problems:
        print(f"{PAGE.relative_to(ROOT)} is stale; re-run `nox -s matrix`:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    if args.check:
        print(f"{PAGE.relative_to(ROOT)} matches the fixes' metadata")
    return 0


def git_commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    raise SystemExit(main())
