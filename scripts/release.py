"""Release checks run by ``.github/workflows/release.yml`` before anything is built or published.

    python scripts/release.py check-tag torchfix-autotune-v0.1.1 [--dry-run] [--github-output FILE]

A release tag is ``<distribution>-v<version>``: ``<distribution>`` one of the family (scripts/family.py)
and ``<version>`` exactly the version in that package's ``version.py``. Anything else fails with a
sentence saying what is wrong (exit 1). On success it prints, and appends to ``--github-output``:

* ``name`` (``torchfix-autotune``), ``version`` (``0.1.1``), ``stem`` (``torchfix_autotune``, the
  file-name form of the wheel and sdist);
* ``repository``: ``testpypi`` for a dry run (``--dry-run``: the workflow was started by hand) or a
  pre-release version (``a``/``b``/``rc``/``.dev``), else ``pypi``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from family import all_packages, package_version

#: PEP 440 public versions in their normal form (what hatchling writes into file names)
PUBLIC_VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
PRE_RELEASE = re.compile(r"(a|b|rc)\d+|\.dev\d+")


class TagError(SystemExit):
    def __init__(self, message: str) -> None:
        super().__init__(f"release tag refused: {message}")


def check_tag(tag: str, dry_run: bool = False) -> dict[str, str]:
    """The release that ``tag`` names (see the module docstring); :class:`TagError` otherwise."""
    names = [p.name for p in all_packages()]
    expected = "expected <distribution>-v<version>, <distribution> one of: " + ", ".join(names)
    matches = [p for p in all_packages() if tag.startswith(f"{p.name}-v")]
    if not matches:
        raise TagError(f"{tag!r} names no distribution of the family ({expected})")
    package = max(matches, key=lambda p: len(p.name))
    version = tag[len(package.name) + 2 :]
    if not PUBLIC_VERSION.fullmatch(version):
        raise TagError(f"{tag!r}: {version!r} is not a PEP 440 version in normal form ({expected})")
    source = package_version(package)
    if version != source:
        raise TagError(
            f"{tag!r} says {package.name} {version}, but its version.py says {source}: "
            f"bump with scripts/bump.py and tag that commit, or tag {package.name}-v{source}"
        )
    pre = bool(PRE_RELEASE.search(version))
    return {
        "name": package.name,
        "version": version,
        "stem": package.name.replace("-", "_"),
        "repository": "testpypi" if dry_run or pre else "pypi",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tag = sub.add_parser("check-tag", help="check a release tag against the family and its versions")
    tag.add_argument("tag")
    tag.add_argument("--dry-run", action="store_true", help="publish to TestPyPI whatever the version")
    tag.add_argument("--github-output", type=Path, help="append key=value lines here ($GITHUB_OUTPUT)")
    args = parser.parse_args(argv)
    release = check_tag(args.tag, dry_run=args.dry_run)
    lines = [f"{key}={value}" for key, value in release.items()]
    print("\n".join(lines))
    if args.github_output:
        with args.github_output.open("a") as handle:
            handle.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
