"""Check the family's built distributions in a wheelhouse (``nox -s build`` runs it after building).

    python scripts/build_check.py check dist/ [NAME ...]   # every family member, or the named ones
    python scripts/build_check.py requirements dist/       # third-party runtime requirements, one a line

``check`` fails (exit 1, one line per problem) unless, for each distribution:

* ``dist/`` holds exactly one wheel and one sdist of it, at the version of its ``version.py``;
* the wheel holds only product code: every file is under the package's own import directory or its
  ``.dist-info``, and none is a test or a test harness (:func:`harness_reason`: a ``tests``/``test``/
  ``benchmarks`` directory, ``conftest.py``, ``test_*.py``/``*_test.py``, or a file on
  :data:`DENY`). The testing kit ``torchfix_core/testing/`` is product code: fix packages' tests
  import it from the installed core;
* every entry point of the wheel (``torchfix.*`` groups, ``torch.backends``, console scripts) names a
  module inside the same wheel, and that module binds the attribute at top level (read with
  :mod:`ast`, nothing is imported): a wheel whose ``packages`` setting forgot a module is caught
  here, not by a user's ``import torch``;
* the sdist, unpacked and built again (isolated, like pip does from an sdist), gives a wheel with the
  same files and the same bytes as the wheel in ``dist/``.

``requirements`` prints the ``Requires-Dist`` of the family's wheels that are not family members
(``packaging``): ``nox -s build`` downloads those into ``dist/`` so that
``pip install --no-index --find-links dist torchfix-all`` needs nothing else.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from family import all_packages, by_name, module_name, package_version

#: Files that are test harnesses by purpose although their names do not say so (wheel paths).
#: A file listed here belongs in the package's ``tests/`` or in ``torchfix_core.testing``.
DENY = frozenset({"torchfix_placement_cache/_multirank.py"})
HARNESS_DIRS = frozenset({"tests", "test", "benchmarks"})
ENTRY_POINT_GROUPS_CHECKED = ("torch.backends", "console_scripts", "gui_scripts")  # and every "torchfix.*" group


def normalized(name: str) -> str:
    """The file-name form of a distribution name (``torchfix_sac_replay``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def harness_reason(path: str) -> str | None:
    """Why the wheel member ``path`` is not product code, or None when it is."""
    parts = path.split("/")
    if path in DENY:
        return "a test harness (on build_check.DENY): move it to the package's tests/ or the testing kit"
    for part in parts[:-1]:
        if part in HARNESS_DIRS:
            return f"inside a {part!r} directory"
    name = parts[-1]
    if name == "conftest.py":
        return "a pytest conftest"
    if re.fullmatch(r"test_.*\.py|.*_test\.py", name):
        return "a test module"
    return None


def wheel_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}


def dist_info_dir(members: dict[str, bytes]) -> str:
    dirs = {p.split("/")[0] for p in members if p.split("/")[0].endswith(".dist-info")}
    if len(dirs) != 1:
        raise ValueError(f"expected one .dist-info directory, found {sorted(dirs) or 'none'}")
    return dirs.pop()


def check_contents(wheel: Path, module: str) -> list[str]:
    """Problems with what the wheel ships (see the module docstring)."""
    members = wheel_members(wheel)
    info = dist_info_dir(members)
    problems = []
    for path in sorted(members):
        top = path.split("/")[0]
        if top not in (module, info):
            problems.append(f"{wheel.name}: {path} is outside {module}/ and {info}/")
            continue
        reason = harness_reason(path)
        if reason:
            problems.append(f"{wheel.name}: {path} is {reason}; a wheel ships product code only")
    return problems


def entry_points(members: dict[str, bytes]) -> list[tuple[str, str, str]]:
    """``(group, name, value)`` for each entry point in the wheel's ``entry_points.txt``."""
    text = members.get(f"{dist_info_dir(members)}/entry_points.txt", b"").decode()
    found, group = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
            continue
        name, _, value = line.partition("=")
        found.append((group, name.strip(), value.strip()))
    return found


def _binds(tree: ast.Module, attribute: str) -> bool:
    """Whether the module binds ``attribute`` at top level (def, class, assignment or import)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == attribute:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == attribute for a in node.names):
                return True
    return False


def check_entry_points(wheel: Path) -> list[str]:
    """Every entry point resolves to a module of this wheel that binds the named attribute."""
    members = wheel_members(wheel)
    problems = []
    points = list(entry_points(members))
    fix_ids = {name for group, name, _ in points if group == "torchfix.fixes"}
    for group, name, value in points:
        if group == "torchfix.triggers":  # the trigger index names the patched library's modules
            if name not in fix_ids:
                problems.append(f"{wheel.name}: entry point [{group}] {name} names no fix of this wheel")
            continue
        if group not in ENTRY_POINT_GROUPS_CHECKED and not group.startswith("torchfix."):
            continue
        module, _, attribute = value.partition(":")
        module, attribute = module.strip(), attribute.split("[")[0].strip()
        base = module.replace(".", "/")
        source = next((members[p] for p in (f"{base}.py", f"{base}/__init__.py") if p in members), None)
        where = f"{wheel.name}: entry point [{group}] {name} = {value}"
        if source is None:
            problems.append(f"{where}: module {module} is not in the wheel (no {base}.py or {base}/__init__.py)")
            continue
        if attribute:
            head = attribute.split(".")[0]
            if not _binds(ast.parse(source.decode()), head):
                problems.append(f"{where}: {base}.py does not define {head!r} at top level")
    return problems


def content_digest(wheel: Path) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in wheel_members(wheel).items()}


def compare_wheels(expected: Path, rebuilt: Path) -> list[str]:
    """Differences in file names or bytes between two wheels (zip timestamps are ignored)."""
    a, b = content_digest(expected), content_digest(rebuilt)
    problems = [f"{expected.name}: {p} is missing from the wheel rebuilt from the sdist" for p in sorted(a.keys() - b)]
    problems += [f"{expected.name}: the wheel rebuilt from the sdist adds {p}" for p in sorted(b.keys() - a)]
    problems += [
        f"{expected.name}: {p} differs in the wheel rebuilt from the sdist"
        for p in sorted(a.keys() & b)
        if a[p] != b[p]
    ]
    return problems


def rebuild_from_sdist(sdist: Path, out: Path) -> Path:
    """Unpack ``sdist`` and build a wheel from it, in an isolated build environment."""
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(out / "src", filter="data")
        else:  # Python < 3.10.12: the sdist is our own build
            archive.extractall(out / "src")
    (tree,) = (out / "src").iterdir()
    cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out / "wheel"), str(tree)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{sdist.name}: building a wheel from the sdist failed:\n{done.stdout}\n{done.stderr}")
    (wheel,) = (out / "wheel").glob("*.whl")
    return wheel


def artifacts(dist: Path, package: Path) -> tuple[list[str], Path | None, Path | None]:
    """``(problems, wheel, sdist)`` of ``package`` in ``dist`` at its source version."""
    stem, version = normalized(package.name), package_version(package)
    wheels = sorted(dist.glob(f"{stem}-*.whl"))
    sdists = sorted(dist.glob(f"{stem}-*.tar.gz"))
    problems = []
    wheel = next((w for w in wheels if w.name.startswith(f"{stem}-{version}-")), None)
    sdist = next((s for s in sdists if s.name == f"{stem}-{version}.tar.gz"), None)
    if wheel is None or len(wheels) != 1:
        found = ", ".join(w.name for w in wheels) or "none"
        problems.append(f"{package.name}: expected one wheel of version {version} in {dist}, found {found}")
    if sdist is None or len(sdists) != 1:
        found = ", ".join(s.name for s in sdists) or "none"
        problems.append(f"{package.name}: expected one sdist of version {version} in {dist}, found {found}")
    return problems, wheel, sdist


def check_package(dist: Path, package: Path, *, rebuild: bool = True) -> list[str]:
    problems, wheel, sdist = artifacts(dist, package)
    if wheel is not None:
        problems += check_contents(wheel, module_name(package))
        problems += check_entry_points(wheel)
    if rebuild and wheel is not None and sdist is not None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                problems += compare_wheels(wheel, rebuild_from_sdist(sdist, Path(tmp)))
            except RuntimeError as exc:
                problems.append(str(exc))
    return problems


def third_party_requirements(dist: Path) -> list[str]:
    """Runtime ``Requires-Dist`` of the family's wheels in ``dist`` naming no family member."""
    family = {normalized(p.name) for p in all_packages()}
    found: set[str] = set()
    for package in all_packages():
        _, wheel, _ = artifacts(dist, package)
        if wheel is None:
            continue
        members = wheel_members(wheel)
        metadata = Parser().parsestr(members[f"{dist_info_dir(members)}/METADATA"].decode())
        for requirement in metadata.get_all("Requires-Dist") or []:
            if re.search(r"\bextra\s*==", requirement):  # an optional extra (``test``), not a runtime need
                continue
            name = re.split(r"[ <>=!~;\[(]", requirement, maxsplit=1)[0]
            if normalized(name) not in family:
                found.add(requirement.strip())
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check the family's wheels and sdists")
    check.add_argument("dist", type=Path)
    check.add_argument("names", nargs="*", help="distributions to check (default: the whole family)")
    check.add_argument("--no-rebuild", action="store_true", help="skip the sdist -> wheel rebuild")
    requirements = sub.add_parser("requirements", help="print third-party runtime requirements")
    requirements.add_argument("dist", type=Path)
    args = parser.parse_args(argv)
    if args.command == "requirements":
        print("\n".join(third_party_requirements(args.dist)))
        return 0
    packages = [by_name(n) for n in args.names] if args.names else all_packages()
    problems = []
    for package in packages:
        found = check_package(args.dist, package, rebuild=not args.no_rebuild)
        print(f"{package.name}: {'ok' if not found else f'{len(found)} problem(s)'}")
        problems += found
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
