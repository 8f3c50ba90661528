"""Generate the files that must never be edited by hand, or check them for drift (``--check``).

* ``packages/torchfix-all/pyproject.toml``: its dependency block lists torchfix-core and every fix
  package under ``packages/``, each as ``name>=X.Y.Z,<X.(Y+1)`` from the package's ``version.py``.

Reads versions without importing any package (``version.py`` is data only).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
ALL_PYPROJECT = PACKAGES / "torchfix-all" / "pyproject.toml"
BLOCK = re.compile(r"(# BEGIN GENERATED[^\n]*\n)(.*?)(# END GENERATED)", re.S)


def package_version(package_dir: Path) -> str:
    module = package_dir.name.replace("-", "_")
    text = (package_dir / "src" / module / "version.py").read_text()
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    if not match:
        raise SystemExit(f"{package_dir}: version.py has no __version__")
    return match.group(1)


def member_packages() -> list[Path]:
    """torchfix-core first, then the fix packages by name; torchfix-all itself excluded."""
    dirs = sorted(
        p for p in PACKAGES.glob("torchfix-*") if (p / "pyproject.toml").is_file() and p.name != "torchfix-all"
    )
    return sorted(dirs, key=lambda p: (p.name != "torchfix-core", p.name))


def dependency_block() -> str:
    lines = ["dependencies = ["]
    for package in member_packages():
        version = package_version(package)
        major, minor = version.split(".")[:2]
        lines.append(f'    "{package.name}>={version},<{major}.{int(minor) + 1}",')
    lines.append("]")
    return "\n".join(lines) + "\n"


def render_all_pyproject(current: str) -> str:
    if not BLOCK.search(current):
        raise SystemExit(f"{ALL_PYPROJECT}: generated block markers are missing")
    return BLOCK.sub(lambda m: m.group(1) + dependency_block() + m.group(3), current)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    args = parser.parse_args(argv)
    current = ALL_PYPROJECT.read_text()
    wanted = render_all_pyproject(current)
    if args.check:
        if current != wanted:
            print(f"{ALL_PYPROJECT.relative_to(ROOT)} is stale: run `python scripts/generate.py`", file=sys.stderr)
            return 1
        print("generated files are up to date")
        return 0
    if current != wanted:
        ALL_PYPROJECT.write_text(wanted)
        print(f"wrote {ALL_PYPROJECT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
