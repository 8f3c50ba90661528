"""Install the family from a wheelhouse into fresh virtual environments, as a user would.

    python scripts/install_check.py dist/ [--torch 2.13.0] [--work DIR] [--case all|single]

Run by ``nox -s install_check`` after ``nox -s build`` (and by the release workflow). Two cases, each
in a new venv made with this interpreter:

* ``all``: ``pip install --no-index --find-links dist torchfix-all`` (pip's configuration files are
  ignored, so nothing but ``dist/`` is seen): exactly the seven family distributions are installed,
  at their ``version.py`` versions, and no torch; ``torchfix-doctor`` exits with
  ``EXIT_NO_TORCH`` (3) and says that torch is not installed. Then ``pip install torch==VERSION``
  (the ordinary index and configuration) and doctor exits 0, activated at ``import torch``, with a
  row per fix in a known state (none ``failed``, every fix at its version).
* ``single``: the same with ``torchfix-sac-replay`` alone, which must pull only torchfix-core.

Every problem is collected and printed; the exit status is 1 if there was any.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from family import all_packages, by_name, core, fix_packages, package_version

EXIT_NO_TORCH = 3  # torchfix_core._doctor.EXIT_NO_TORCH (documented in the README's Doctor section)
SINGLE = "torchfix-sac-replay"
FIX_STATES = {"applied", "pending", "not-needed", "out-of-range", "disabled", "not-installed"}  # never failed


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Venv:
    """A fresh virtual environment at ``path``."""

    def __init__(self, path: Path) -> None:
        if path.exists():
            shutil.rmtree(path)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        self.path = path
        self.bin = path / ("Scripts" if os.name == "nt" else "bin")
        self.python = str(self.bin / "python")

    def run(self, *cmd: str, offline: bool = False) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "PIP_", "VIRTUAL_ENV"))}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        if offline:  # only the wheelhouse: no index, no find-links or extra index from a config file
            env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")
        return subprocess.run(list(cmd), capture_output=True, text=True, env=env)

    def distributions(self) -> dict[str, str]:
        code = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
        done = self.run(self.python, "-c", code)
        return {canonical(k): v for k, v in json.loads(done.stdout).items()}


def doctor(venv: Venv, *args: str) -> tuple[int, str]:
    """``torchfix-doctor ARGS``: exit status and standard output (its standard error is echoed)."""
    done = venv.run(str(venv.bin / "torchfix-doctor"), *args)
    if done.stderr.strip():
        print(done.stderr, file=sys.stderr)
    return done.returncode, done.stdout


def check_offline_install(venv: Venv, dist: Path, target: str, expected: list[Path]) -> list[str]:
    """``pip install --no-index --find-links dist target``; exactly ``expected`` of the family."""
    done = venv.run(
        venv.python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(dist), target, offline=True
    )
    if done.returncode != 0:
        return [f"{target}: pip install --no-index --find-links {dist} failed:\n{done.stdout}{done.stderr}"]
    installed = venv.distributions()
    family = {canonical(p.name) for p in all_packages()}
    got = {name: version for name, version in installed.items() if name in family}
    wanted = {canonical(p.name): package_version(p) for p in expected}
    problems = []
    if got != wanted:
        problems.append(f"{target}: installed family distributions {got}, expected {wanted}")
    if "torch" in installed:
        problems.append(
            f"{target}: installing it installed torch {installed['torch']}; a fix package never moves torch"
        )
    return problems


def check_doctor_without_torch(venv: Venv, target: str) -> list[str]:
    code, out = doctor(venv)
    problems = []
    if code != EXIT_NO_TORCH:
        problems.append(f"{target}: torchfix-doctor without torch exited {code}, expected {EXIT_NO_TORCH}:\n{out}")
    if "torch: not installed" not in out:
        problems.append(f"{target}: torchfix-doctor without torch does not say 'torch: not installed':\n{out}")
    print(f"--- {target}, no torch: torchfix-doctor exited {code}\n{out}")
    return problems


def doctor_rows_problems(report: dict[str, Any], installed: list[Path], target: str) -> list[str]:
    """Problems in a doctor ``--json`` report made with torch installed (pure: unit-tested)."""
    problems = []
    if not report["torch"]["installed"]:
        problems.append(f"{target}: doctor does not see torch: {report['torch']}")
    if report["activation"]["source"] in ("none", "off", "failed"):
        problems.append(f"{target}: torchfix was not activated at import torch: {report['activation']}")
    versions = {p.name: package_version(p) for p in fix_packages()}
    seen = set()
    for row in report["fixes"]:
        name = row["distribution"]
        if name not in versions:
            continue  # a fix from outside the family (none in a fresh venv)
        seen.add(name)
        if all(p.name != name for p in installed):
            if row["state"] != "not-installed":
                problems.append(f"{target}: {row['id']} is not installed but doctor says {row['state']}")
            continue
        if row["version"] != versions[name]:
            problems.append(f"{target}: doctor shows {row['id']} of {name} {row['version']}, built {versions[name]}")
        # not-installed is right for an installed fix whose target library is absent (TransformerEngine)
        if row["state"] not in FIX_STATES:
            problems.append(f"{target}: {row['id']} is {row['state']}: {row['reason']}")
    for package in fix_packages():
        if package in installed and package.name not in seen:
            problems.append(f"{target}: doctor has no row for {package.name}")
    return problems


def check_with_torch(venv: Venv, torch: str, target: str, installed: list[Path]) -> list[str]:
    done = venv.run(venv.python, "-m", "pip", "install", "-q", f"torch=={torch}")
    if done.returncode != 0:
        return [f"{target}: pip install torch=={torch} failed:\n{done.stdout}{done.stderr}"]
    code, out = doctor(venv)
    print(f"--- {target}, torch {torch}: torchfix-doctor exited {code}\n{out}")
    if code != 0:
        return [f"{target}: torchfix-doctor with torch {torch} exited {code}"]
    code, out = doctor(venv, "--json")
    if code != 0:
        return [f"{target}: torchfix-doctor --json with torch {torch} exited {code}:\n{out}"]
    return doctor_rows_problems(json.loads(out), installed, target)


def run_case(case: str, dist: Path, work: Path, torch: str) -> list[str]:
    target, installed = ("torchfix-all", all_packages()) if case == "all" else (SINGLE, [core(), by_name(SINGLE)])
    venv = Venv(work / f"venv-{case}")
    problems = check_offline_install(venv, dist, target, installed)
    if problems:
        return problems
    problems += check_doctor_without_torch(venv, target)
    problems += check_with_torch(venv, torch, target, installed)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path, help="the wheelhouse (nox -s build writes dist/)")
    parser.add_argument("--torch", default="2.13.0", help="the torch release added in the second step")
    parser.add_argument("--work", type=Path, help="where the venvs go (default: a temporary directory)")
    parser.add_argument("--case", choices=("all", "single"), action="append", help="default: both")
    args = parser.parse_args(argv)
    dist = args.dist.resolve()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work.resolve() if args.work else Path(tmp)
        for case in args.case or ["all", "single"]:
            problems += run_case(case, dist, work, args.torch)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("install check: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
