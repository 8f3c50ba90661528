"""Generate the files that must never be edited by hand, or check them for drift (``--check``).

* ``packages/torchfix-all/pyproject.toml``: its dependency block lists torchfix-core and every fix
  package under ``packages/``, each as ``name>=X.Y.Z,<X.(Y+1)`` from the package's ``version.py``.

Reads versions without importing any package (``version.py`` is data only).
"""

from __future__ import annotations

import argparse
import re
import sys

from family import ROOT, member_packages, meta_package, package_version

ALL_PYPROJECT = meta_package() / "pyproject.toml"
BLOCK = re.compile(r"(# BEGIN GENERATED[^\n]*\n)(.*?)(# END GENERATED)", re.S)


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
