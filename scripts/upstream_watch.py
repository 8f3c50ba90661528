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
* each fix's red reproduction with the fix disabled: the ``*_fails_without_fix`` node that the
  combination suite lists (``tests/combinations/test_combinations.py::REPRODUCTIONS``, read as data).
  Those tests assert that the bug reproduces exactly when the fix's probe says it is present, so a
  pass confirms the probe and a failure means probe and reality disagree.

Per fix and environment the report answers: is the bug still present, does the fix still apply
cleanly, is the release inside the validated range; and gives one line, in particular
``bug present above validated range: extend after validation`` and ``bug gone: fix can retire there``
(docs/releasing.md says what to do with either). The judgement is :func:`judge`, a pure function.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from family import PACKAGES, ROOT, fix_packages

COMBINATIONS = ROOT / "tests" / "combinations" / "test_combinations.py"
SIGNAL_EXTEND = "bug present above validated range: extend after validation"
SIGNAL_RETIRE = "bug gone: fix can retire there"


def reproductions() -> dict[str, tuple[str, str]]:
    """fix id -> (package directory name, the red reproduction's test node), from the combination suite."""
    tree = ast.parse(COMBINATIONS.read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "REPRODUCTIONS":
            table = ast.literal_eval(node.value)  # type: ignore[arg-type]
            break
    else:
        raise SystemExit(f"{COMBINATIONS}: REPRODUCTIONS not found")
    out = {}
    for fix, (package, nodes) in table.items():
        red = [n for n in nodes if "fails_without" in n]
        if len(red) != 1:
            raise SystemExit(f"{COMBINATIONS}: {fix} has no single '*fails_without*' reproduction in {nodes}")
        out[fix] = (package, red[0])
    return out


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


def run_reproduction(package: str, node: str, timeout: float) -> dict[str, str]:
    """Run one red reproduction; ``{"outcome": passed|failed|skipped|error, "tail": ...}``."""
    tests = PACKAGES / package / "tests"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests), f"{tests}/{node}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"outcome": "error", "tail": f"timed out after {timeout:.0f} s"}
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode == 0:
        outcome = "skipped" if "skipped" in summary and "passed" not in summary else "passed"
    elif done.returncode == 1:
        outcome = "failed"
    else:
        outcome = "error"
    return {"outcome": outcome, "summary": summary, "tail": "" if outcome == "passed" else done.stdout[-2000:]}


def collect(label: str, run_reproductions: bool, timeout: float) -> dict[str, Any]:
    repro = {}
    if run_reproductions:
        for fix, (package, node) in reproductions().items():
            print(f"[{label}] {fix}: {node}", flush=True)
            repro[fix] = {"node": node, **run_reproduction(package, node, timeout)}
    plain = doctor()
    libraries = {lib for row in plain["fixes"] for lib in row.get("targets") or {}}
    return {
        "label": label,
        "versions": library_versions(libraries),
        "forced": doctor(TORCHFIX_FORCE="all"),
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
