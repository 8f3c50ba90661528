"""``torchfix-doctor verify [ID ...]``: each fix proves itself on this machine.

For each installed fix whose probe says its bug is present here (state ``applied``; ``--all``: also
``not-needed`` and ``out-of-range``, to confirm upstream's fix holds), run its declared reproduction
(``FixSpec.reproduction``, :mod:`torchfix_core.reproduction`) in fresh interpreters: once with every
fix off, once with only this fix on. One row per fix: its state, whether the bug showed without the
fix, whether it was gone with it, the measure, the seconds.

Where a fix is ``not-needed`` or ``out-of-range`` it applies nothing, so one run (without) says
whether the bug is absent, as the probe or range claims. A reproduction whose needs this machine
lacks (a GPU, a library) is skipped with what it needs; ``--budget SECONDS`` skips what would not
fit the time left (from the declared ``seconds``), and says so. Fixes given by id run whatever their
state, unless they are ``not-installed`` or ``failed``.

Exit status: 1 when a fix did not repair its bug here (a new variant: the row says what to attach
and where to report it), or the bug reproduced where the probe said ``not-needed``; 2 when a reproduction broke while running (the row says why) or on bad input
(an unknown id, a budget that is not a number); else 0. A skipped reproduction, and a bug the probe
calls present that does not show on this hardware, are reported, not failures; so is a bug that
reproduces outside a fix's validated range (the range records where the fix was validated: the row
points to the fix's page and ``TORCHFIX_FORCE``). Progress goes to
stderr while it runs; ``--json`` prints the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable

__all__ = ["main", "verify"]

#: exit statuses
EXIT_OK, EXIT_NOT_REPAIRED, EXIT_BROKE = 0, 1, 2
#: states whose fix applies (run without and with it); with ``--all`` or by id, also the states where
#: upstream's fix or the range keeps it out (one run, without); by id only, a fix turned off here
APPLIES, ALSO_WITH_ALL, BY_ID = ("applied", "pending"), ("not-needed", "out-of-range"), ("disabled",)
#: where a row that found a new variant sends the user (what to attach: docs/diagnosis.md)
REPORT_TO = (
    "with `torchfix-doctor --json` and `torchfix-doctor verify --json` (docs/diagnosis.md, 'Reporting a new variant')"
)


def _child_env(fix_id: str, enabled: bool) -> dict[str, str]:
    """This environment without any ``TORCHFIX_*`` variable, then every fix off but ``fix_id``,
    which is on or off: the fix's default configuration, whatever the caller's settings."""
    from torchfix_core._env import env_key

    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.update({"TORCHFIX_DISABLE": "all", env_key(fix_id): "1" if enabled else "0"})
    return env


def run_reproduction(fix_id: str, enabled: bool, timeout: float) -> dict[str, Any]:
    """One run of ``fix_id``'s reproduction in a fresh interpreter: the child's JSON record, or a
    record with ``broke`` saying why there is none (a crash, a timeout, no JSON line)."""
    command = [sys.executable, "-m", "torchfix_core.reproduction", fix_id]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, env=_child_env(fix_id, enabled), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"id": fix_id, "broke": f"timed out after {timeout:.0f} s", "seconds": round(timeout, 1)}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    try:
        record: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        record = {"id": fix_id, "broke": f"exit status {proc.returncode}, no result: {' | '.join(tail)[:600]}"}
    record.setdefault("seconds", round(time.perf_counter() - started, 2))
    return record


def _missing(declared: Any) -> list[str]:
    """What this machine lacks of a reproduction's needs (empty: it can run)."""
    import importlib.util

    missing = []
    if declared.needs_cuda:
        import torch

        if not torch.cuda.is_available():
            missing.append("a CUDA GPU")
    for name, specifier in declared.libraries.items():
        if importlib.util.find_spec(name) is None:
            missing.append(f"{name} {specifier}".strip())
            continue
        from torchfix_core._versions import installed_version, judge

        version = installed_version(name)
        if specifier and version is not None and not judge(version, specifier):
            missing.append(f"{name} {specifier} (installed: {version})")
    return missing


def _verdict(state: str, without: dict[str, Any] | None, with_fix: dict[str, Any] | None) -> tuple[str, int]:
    """The row's verdict and its exit status from the runs' records."""
    for record in (without, with_fix):
        if record is not None and "broke" in record:
            return f"reproduction broke: {record['broke']}", EXIT_BROKE
    off = (without or {}).get("outcome", {}).get("result")
    on = (with_fix or {}).get("outcome", {}).get("result")
    if "cannot-run" in (off, on):
        why = next(r["outcome"]["detail"] for r in (without, with_fix) if r and r["outcome"]["result"] == "cannot-run")
        return f"skipped: cannot run here ({why})", EXIT_OK
    if with_fix is None:  # not-needed / out-of-range: one run
        if off == "observed" and state == "out-of-range":
            # the range says where the fix was validated, not that the bug is absent: a documented
            # gap (e.g. a release without what the fix needs), not a wrong decision
            return (
                "the bug reproduces here, outside the fix's validated range, so torchfix does not apply it: "
                "see its page (docs/fixes/<id>.md) for where it was validated; TORCHFIX_FORCE=<id> applies it "
                "anyway (its probe still decides)",
                EXIT_OK,
            )
        if off == "observed":
            return (
                f"the bug reproduces although the probe says {state}: torchfix does not repair it here; "
                f"report it ({REPORT_TO})",
                EXIT_NOT_REPAIRED,
            )
        return "the bug does not reproduce: upstream's fix (or this release) holds", EXIT_OK
    if off != "observed":
        return "the bug did not show on this machine without the fix (the probe says it is present)", EXIT_OK
    if on == "observed":
        return (
            f"NOT REPAIRED: the bug showed with the fix {with_fix.get('state')}: a new variant; report it ({REPORT_TO})",
            EXIT_NOT_REPAIRED,
        )
    return "repaired: reproduced without the fix, gone with it", EXIT_OK


def verify(
    report: dict[str, Any],
    ids: list[str],
    *,
    include_all: bool = False,
    budget: float | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> list[dict[str, Any]]:
    """One row per fix to verify (``ids``, else every installed fix), from doctor's ``report``."""
    from torchfix_core import _registry

    rows: list[dict[str, Any]] = []
    left = budget
    for fix in report["fixes"]:
        fix_id, state = fix["id"], fix["state"]
        if ids and fix_id not in ids:
            continue
        row: dict[str, Any] = {"id": fix_id, "state": state, "without": None, "with": None, "seconds": 0.0}
        rows.append(row)
        declared = _registry.entries()[fix_id].spec.reproduction if fix_id in _registry.entries() else None
        row["measure_of"] = declared.measure if declared else ""
        runnable = APPLIES + (ALSO_WITH_ALL if include_all or ids else ()) + (BY_ID if ids else ())
        if declared is None:
            row["verdict"], row["exit"] = "skipped: the fix declares no reproduction", EXIT_OK
            continue
        if state not in runnable:
            hint = "name its id or pass --all to run it" if state in ALSO_WITH_ALL + BY_ID else fix.get("reason", "")
            row["verdict"], row["exit"] = f"skipped: {state} here ({hint})", EXIT_OK
            continue
        missing = _missing(declared)
        if missing:
            row["verdict"], row["exit"] = f"skipped: needs {', '.join(missing)}", EXIT_OK
            continue
        runs = 1 if state in ALSO_WITH_ALL else 2  # a fix kept out applies nothing: "with" is "without"
        if left is not None and declared.seconds * runs > left:
            row["verdict"] = (
                f"skipped: would not fit the budget (about {declared.seconds * runs:.0f} s, {left:.0f} s left)"
            )
            row["exit"] = EXIT_OK
            continue
        timeout = max(120.0, declared.seconds * 10)
        progress(f"verify: {fix_id}: without the fix (about {declared.seconds:.0f} s) ...")
        without = run_reproduction(fix_id, False, timeout)
        with_fix = None
        if runs == 2 and "broke" not in without:
            progress(f"verify: {fix_id}: with the fix ...")
            with_fix = run_reproduction(fix_id, True, timeout)
        spent = float(without.get("seconds", 0)) + float((with_fix or {}).get("seconds", 0))
        if left is not None:
            left -= spent
        row.update({"without": without, "with": with_fix, "seconds": round(spent, 1)})
        row["verdict"], row["exit"] = _verdict(state, without, with_fix)
        progress(f"verify: {fix_id}: {row['verdict']} ({spent:.1f} s)")
    return rows


def _cell(record: dict[str, Any] | None) -> str:
    if record is None:
        return "-"
    if "broke" in record:
        return "broke"
    return {"observed": "bug", "not-observed": "no bug", "cannot-run": "cannot run"}.get(
        record.get("outcome", {}).get("result", ""), "?"
    )


def render(rows: list[dict[str, Any]]) -> str:
    header = ("FIX", "STATE", "WITHOUT FIX", "WITH FIX", "SECONDS")
    table = [(r["id"], r["state"], _cell(r["without"]), _cell(r["with"]), f"{r['seconds']:.1f}") for r in rows]
    widths = [max(len(str(row[i])) for row in [header, *table]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    for row, cells in zip(rows, table):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)))
        lines.append(f"    {row['verdict']}")
        for label, record in (("without", row["without"]), ("with", row["with"])):
            measure = (record or {}).get("outcome", {}).get("measure")
            if measure:
                lines.append(f"    {label} the fix: {measure}")
    return "\n".join(lines)


def device_name(cuda: bool) -> str:
    """The GPU the reproductions ran on (``torch.cuda.get_device_name()``, torch is imported by
    doctor already), ``"cpu"`` without CUDA; ``"?"`` where it cannot be read."""
    if not cuda:
        return "cpu"
    try:
        import torch

        return str(torch.cuda.get_device_name(0))
    except Exception:  # noqa: BLE001 - the name is shown, never required
        return "?"


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget takes a number of seconds, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"--budget takes a number of seconds >= 0, got {text!r}")
    return value


def main(argv: list[str], collect: Callable[..., dict[str, Any]]) -> int:
    parser = argparse.ArgumentParser(prog="torchfix-doctor verify", description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", metavar="ID", help="fix ids (default: every installed fix)")
    parser.add_argument("--all", action="store_true", help="also run the not-needed and out-of-range fixes")
    parser.add_argument("--budget", type=_budget, default=None, metavar="SECONDS", help="skip what would not fit")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    report = collect(resolve=True)
    if not report["torch"]["installed"]:
        print(f"torchfix-doctor verify: torch is not importable here ({report['torch']['error']})", file=sys.stderr)
        return EXIT_BROKE
    known = {fix["id"] for fix in report["fixes"]}
    unknown = sorted(set(args.ids) - known)
    if unknown:
        print(
            f"torchfix-doctor verify: unknown fix id(s) {', '.join(unknown)}; installed: {', '.join(sorted(known))}",
            file=sys.stderr,
        )
        return EXIT_BROKE
    rows = verify(
        report,
        args.ids,
        include_all=args.all,
        budget=args.budget,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    result = {
        "torch": report["torch"].get("version"),
        "cuda": report["torch"].get("cuda_available"),
        "device": device_name(bool(report["torch"].get("cuda_available"))),
        "python": platform.python_version(),
        "rows": rows,
    }
    print(json.dumps(result, indent=2) if args.json else render(rows))
    return max((row["exit"] for row in rows), default=EXIT_OK)
