"""Has upstream moved? Each fix's probe and red reproduction on the newest torch / TransformerEngine.

    python scripts/upstream_watch.py collect --label release --out .upstream-watch/release.json
    python scripts/upstream_watch.py report .upstream-watch/*.json [--out .upstream-watch/report.md]

``nox -s upstream_watch`` (weekly, ``.github/workflows/upstream-watch.yml``) installs the newest
torch release, then the newest nightly / pre-release where the nightly index can be reached, with
the newest TransformerEngine and the whole family, and runs ``collect`` in each; ``report`` turns
the files into a short page. ``collect`` runs in the environment under watch:

* doctor ``--json`` with ``TORCHFIX_FORCE=all``: each fix's probe runs even outside its validated
  range, so ``applied`` = bug present and the patch points have the expected shape, ``not-needed``
  = bug gone, ``failed`` (``refused: ...``) = the patch points or signatures changed;
* doctor ``--json`` as users run it (the state they would see);
* each fix's declared reproduction (``FixSpec.reproduction``, the one ``torchfix-doctor verify`` runs)
  with the fix switched off (``python -m torchfix_core.reproduction ID``). Its outcome is held against
  the forced probe: the bug observed where the probe says present, or not observed where it says
  gone, is ``passed`` (the probe confirmed); the other way round ``failed`` (probe and reality
  disagree); ``skipped`` where it cannot run here (no GPU, a library missing), ``error`` where it
  broke.

Per fix and environment the report answers: is the bug still present, does the fix still apply
cleanly, is the release inside the validated range; and gives one line, in particular
``bug present above validated range: extend after validation`` and ``bug gone: fix can retire there``
(docs/releasing.md says what to do with either). The judgement is :func:`judge`, a pure function.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from family import ROOT, fix_packages

SIGNAL_EXTEND = "bug present above validated range: extend after validation"
SIGNAL_RETIRE = "bug gone: fix can retire there"


def reproductions() -> dict[str, str]:
    """fix id -> its declared reproduction (``module:function``), for every installed fix that declares
    one (the installed specs: what this environment would run)."""
    from torchfix_core import _registry

    return {
        fix: entry.spec.reproduction.run
        for fix, entry in sorted(_registry.entries().items())
        if entry.spec.reproduction is not None
    }


# ---------------------------------------------------------------- collect (in the watched environment)


def _env(**extra: str) -> dict[str, str]:
    from torchfix_core.testing import clean_environ

    env = clean_environ()
    env.update(extra)
    return env


def doctor(**extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "torchfix_core", "--json"], capture_output=True, text=True, env=_env(**extra)
    )
    if not done.stdout.strip():
        raise SystemExit(f"torchfix-doctor printed nothing (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def library_versions(libraries: set[str]) -> dict[str, str | None]:
    """Import name -> installed version of torch and of every library a fix targets (None when absent)."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    providers = packages_distributions()
    found: dict[str, str | None] = {}
    for library in ["torch", *sorted(set(libraries) - {"torch"})]:
        # the distribution named like the import (transformer-engine), else whichever provides it
        candidates = [library.replace("_", "-"), *providers.get(library, [])]
        found[library] = None
        for dist in candidates:
            try:
                found[library] = version(dist)
                break
            except PackageNotFoundError:
                continue
    return found


def agreement(result: str | None, probe_state: str) -> str:
    """The reproduction's ``result`` (with the fix off) against the forced probe's state: ``passed``
    where they agree (observed and ``applied``, not observed and ``not-needed``), ``failed`` where they
    disagree, ``skipped`` where it cannot run here or the probe decided nothing (``failed``, pending),
    ``error`` where it broke (``result`` None)."""
    if result is None:
        return "error"
    if result == "cannot-run" or probe_state not in ("applied", "not-needed"):
        return "skipped"
    return "passed" if (result == "observed") == (probe_state == "applied") else "failed"


def run_reproduction(fix: str, probe_state: str, timeout: float) -> dict[str, str]:
    """Run ``fix``'s declared reproduction once with the fix off, in a fresh interpreter;
    ``{"outcome": passed|failed|skipped|error, "result", "measure", "tail"}`` (:func:`agreement`)."""
    from torchfix_core.testing import only_fix

    cmd = [sys.executable, "-m", "torchfix_core.reproduction", fix]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=_env(**only_fix(fix, False)), timeout=timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "error", "tail": f"timed out after {timeout:.0f} s"}
    try:
        record = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        record = {"broke": f"exit {done.returncode}, no record printed"}
    seen = record.get("outcome") or {}
    outcome = agreement(None if "broke" in record else seen.get("result"), probe_state)
    tail = record.get("broke") or seen.get("detail", "")
    if outcome in ("failed", "error"):
        tail = f"{tail}\n{done.stderr[-2000:]}"
    return {"outcome": outcome, "result": seen.get("result", ""), "measure": seen.get("measure", ""), "tail": tail}


def collect(label: str, run_reproductions: bool, timeout: float) -> dict[str, Any]:
    forced = doctor(TORCHFIX_FORCE="all")
    states = {row["id"]: row["state"] for row in forced["fixes"]}
    repro = {}
    if run_reproductions:
        for fix, target in reproductions().items():
            print(f"[{label}] {fix}: {target}", flush=True)
            repro[fix] = {"run": target, **run_reproduction(fix, states.get(fix, "pending"), timeout)}
    plain = doctor()
    libraries = {lib for row in plain["fixes"] for lib in row.get("targets") or {}}
    return {
        "label": label,
        "versions": library_versions(libraries),
        "forced": forced,
        "plain": plain,
        "reproductions": repro,
    }


# ---------------------------------------------------------------- judgement (pure)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One fix in one environment. ``None`` = could not be told here (say why in ``signal``)."""

    fix: str
    bug_present: bool | None
    applies_cleanly: bool | None
    in_range: bool | None
    position: str  # inside / above / below / unknown, against the validated range
    reproduction: str  # passed / failed / skipped / error / not-run
    signal: str


def range_position(version: str | None, specifier: str | None) -> str:
    """Where ``version`` lies against the validated ``specifier``: ``inside``, ``above``, ``below`` or
    ``unknown``. Inside or not is torchfix-core's own range judgement (the registry's gate); a
    pre-release at the edge of the range (ambiguous there) counts as its release (``2.17.0.dev20260301``
    -> 2.17.0). Outside, the upper bounds say whether it is above the range."""
    if version is None or not specifier:
        return "unknown"
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version
    from torchfix_core._versions import Verdict as RangeVerdict
    from torchfix_core._versions import judge as judge_range

    try:
        release = Version(Version(version).base_version)
    except InvalidVersion:
        return "unknown"
    verdict, _ = judge_range(version, specifier)
    if verdict is RangeVerdict.IN_RANGE or (
        verdict is RangeVerdict.AMBIGUOUS and judge_range(str(release), specifier)[0] is RangeVerdict.IN_RANGE
    ):
        return "inside"
    for clause in SpecifierSet(specifier):
        if clause.operator in ("<", "<=") and release >= Version(clause.version):
            return "above"
    return "below"


def judge(
    fix: str,
    forced: dict[str, Any] | None,
    plain: dict[str, Any] | None,
    reproduction: dict[str, str] | None,
    versions: dict[str, str | None],
) -> Verdict:
    """The verdict for ``fix`` from its doctor rows (forced and as users see it), its reproduction's
    outcome and the installed target versions."""
    repro = (reproduction or {}).get("outcome", "not-run")
    row = forced or plain
    if row is None or (row["state"] == "not-installed" and row.get("version") is None):
        return Verdict(fix, None, None, None, "unknown", repro, "not checked: the fix package is not installed here")
    targets = dict((plain or row).get("targets") or row.get("targets") or {})
    positions = [range_position(versions.get(lib), spec) for lib, spec in targets.items()]
    position = next((p for p in ("above", "below", "unknown") if p in positions), "inside") if positions else "unknown"
    in_range = {"inside": True, "above": False, "below": False}.get(position)
    missing = [lib for lib in targets if versions.get(lib) is None]
    state, reason = row["state"], row.get("reason", "")

    def verdict(bug: bool | None, applies: bool | None, signal: str) -> Verdict:
        return Verdict(fix, bug, applies, in_range, position, repro, signal)

    if missing or state == "not-installed":
        libs = ", ".join(missing) or "its target library"
        return verdict(None, None, f"not checked: {libs} is not installed here")
    if state == "failed":
        return verdict(None, False, f"fix does not apply cleanly: {reason}; update its patch points")
    if state not in ("applied", "not-needed"):
        return verdict(None, None, f"not checked: the fix stayed {state} ({reason})")
    bug = state == "applied"
    if repro in ("failed", "error"):
        said = "present" if bug else "gone"
        return verdict(bug, bug or None, f"reproduction {repro} while the probe says the bug is {said}: investigate")
    if not bug:
        return verdict(False, None, SIGNAL_RETIRE)
    if position == "above":
        return verdict(True, True, SIGNAL_EXTEND)
    if position == "below":
        return verdict(True, True, "bug present below the validated range: not validated there")
    return verdict(True, True, "bug present inside the validated range: fix needed and applies")


def judge_environment(result: dict[str, Any]) -> list[Verdict]:
    forced = {row["id"]: row for row in result["forced"]["fixes"]}
    plain = {row["id"]: row for row in result["plain"]["fixes"]}
    family = {p.name for p in fix_packages()}
    fixes = [fid for fid, row in plain.items() if row.get("distribution") in family]
    return [
        judge(fid, forced.get(fid), plain.get(fid), result["reproductions"].get(fid), result["versions"])
        for fid in fixes
    ]


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "?"}[value]


def render(results: list[dict[str, Any]], notes: Sequence[str] = ()) -> str:
    lines = ["# torchfix upstream watch", ""]
    lines += [f"- {note}" for note in notes]
    for result in results:
        versions = ", ".join(f"{k} {v or 'not installed'}" for k, v in result["versions"].items())
        lines += ["", f"## {result['label']}: {versions}", ""]
        lines.append("| fix | bug present | applies cleanly | in validated range | red reproduction | signal |")
        lines.append("|---|---|---|---|---|---|")
        for v in judge_environment(result):
            in_range = _yes_no(v.in_range) + (f" ({v.position})" if v.position in ("above", "below") else "")
            lines.append(
                f"| {v.fix} | {_yes_no(v.bug_present)} | {_yes_no(v.applies_cleanly)} | {in_range} | "
                f"{v.reproduction} | {v.signal} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="probe and reproduce in this environment")
    c.add_argument("--label", required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--no-reproductions", action="store_true", help="doctor rows only")
    c.add_argument("--timeout", type=float, default=1200, help="seconds per reproduction")
    r = sub.add_parser("report", help="render collected results")
    r.add_argument("results", type=Path, nargs="+")
    r.add_argument("--note", action="append", default=[], help="a line shown at the top (e.g. no nightly index)")
    r.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "collect":
        result = collect(args.label, not args.no_reproductions, args.timeout)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
        print(render([result]))
        return 0
    results = [json.loads(p.read_text()) for p in args.results]
    page = render(results, args.note)
    if args.out:
        args.out.write_text(page)
    print(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
