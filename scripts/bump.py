"""Bump one distribution's version: ``version.py``, torchfix-all's pins and a dated CHANGELOG entry.

    python scripts/bump.py torchfix-autotune patch             # 0.1.0 -> 0.1.1
    python scripts/bump.py torchfix-core minor --with-all      # 0.1.x -> 0.2.0, and torchfix-all's minor
    python scripts/bump.py torchfix-autotune 0.1.3 --message "Fixed: ..." --date 2026-12-01

Each distribution is released on its own (docs/releasing.md). The tool:

1. refuses to start when torchfix-all's pins are already stale (a ``version.py`` edited by hand);
2. moves the ``## [Unreleased]`` entries of the package's ``CHANGELOG.md`` (Keep a Changelog) under
   ``## [X.Y.Z] - DATE``; with nothing there it needs ``--message`` (added under ``### Changed``);
3. regenerates torchfix-all's pins (``scripts/generate.py``) and notes the new pin under torchfix-all's
   ``[Unreleased]``. A version outside the pin the current torchfix-all has for the package (a minor
   or major bump: pins are ``>=X.Y.Z,<X.(Y+1)``) would leave that torchfix-all's users without it,
   so it fails unless ``--with-all`` also bumps torchfix-all's minor version, with its own entry;
4. checks afterwards that the pins are current (``generate.py --check``).

Every file is computed before any is written: a refusal leaves the tree untouched. Nothing is
committed or tagged; the tool prints the tag to push (``<distribution>-v<version>``).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

import generate
from family import ROOT, by_name, meta_package, package_version, version_file

UNRELEASED = re.compile(r"^## \[Unreleased\][^\n]*\n(.*?)(?=^## \[|\Z)", re.M | re.S)
VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


class BumpError(SystemExit):
    """A refusal, with the sentence saying why (exit status 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"bump refused: {message}")


def parse(version: str) -> tuple[int, int, int]:
    match = VERSION.match(version)
    if not match:
        raise BumpError(f"{version!r} is not X.Y.Z")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def next_version(current: str, how: str) -> str:
    """``patch``/``minor``/``major`` after ``current``, or ``how`` itself when it is a version above it."""
    major, minor, patch = parse(current)
    if how == "patch":
        return f"{major}.{minor}.{patch + 1}"
    if how == "minor":
        return f"{major}.{minor + 1}.0"
    if how == "major":
        return f"{major + 1}.0.0"
    if parse(how) <= (major, minor, patch):
        raise BumpError(f"{how} is not above the current version {current}")
    return how


def pin_admits(pins_block: str, name: str, version: str) -> tuple[bool, str]:
    """Whether torchfix-all's pin for ``name`` (``>=A.B.C,<A.(B+1)``) admits ``version``; and the pin."""
    match = re.search(rf'"{re.escape(name)}>=([\d.]+),<(\d+)\.(\d+)"', pins_block)
    if not match:
        raise BumpError(f"torchfix-all has no generated pin for {name}")
    low, high = parse(match.group(1)), (int(match.group(2)), int(match.group(3)))
    pin = f">={match.group(1)},<{match.group(2)}.{match.group(3)}"
    return low <= parse(version) and parse(version)[:2] < high, pin


def changelog_release(text: str, path: Path, version: str, date: str, message: str | None) -> str:
    """``text`` with its [Unreleased] entries (plus ``message``) moved under ``## [version] - date``."""
    match = UNRELEASED.search(text)
    if not match:
        raise BumpError(f"{path.relative_to(ROOT)} has no '## [Unreleased]' section")
    if f"## [{version}]" in text:
        raise BumpError(f"{path.relative_to(ROOT)} already has a section for {version}")
    entries = match.group(1).strip()
    if message:
        entries = add_entry(entries, "Changed", message)
    if not entries:
        raise BumpError(f"nothing under [Unreleased] in {path.relative_to(ROOT)}: say what changed (--message)")
    released = f"## [Unreleased]\n\n## [{version}] - {date}\n\n{entries}\n\n"
    return text[: match.start()] + released + text[match.end() :]


def add_entry(entries: str, kind: str, line: str) -> str:
    """Add ``- line`` under ``### kind`` of a block of Keep a Changelog entries."""
    heading = f"### {kind}"
    if f"{heading}\n\n" in entries:
        return entries.replace(f"{heading}\n\n", f"{heading}\n\n- {line}\n", 1)
    return f"{entries}\n\n{heading}\n\n- {line}".strip()


def note_unreleased(text: str, path: Path, line: str) -> str:
    """``text`` with ``- line`` added under ``### Changed`` of its [Unreleased] section."""
    match = UNRELEASED.search(text)
    if not match:
        raise BumpError(f"{path.relative_to(ROOT)} has no '## [Unreleased]' section")
    entries = add_entry(match.group(1).strip(), "Changed", line)
    return text[: match.start()] + f"## [Unreleased]\n\n{entries}\n\n" + text[match.end() :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("distribution", help="e.g. torchfix-autotune")
    parser.add_argument("how", help="patch, minor, major, or an explicit X.Y.Z")
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="release date (YYYY-MM-DD)")
    parser.add_argument("--message", help="a changelog line, when [Unreleased] is empty or to add one")
    parser.add_argument("--with-all", action="store_true", help="also bump torchfix-all (needed when its pin moves)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.date):
        raise BumpError(f"--date {args.date!r} is not YYYY-MM-DD")

    package, meta = by_name(args.distribution), meta_package()
    pins_path = generate.ALL_PYPROJECT
    pins = pins_path.read_text()
    if generate.render_all_pyproject(pins) != pins:
        raise BumpError(
            f"{pins_path.relative_to(ROOT)}'s pins are already stale (a version.py changed without "
            "`python scripts/generate.py`): regenerate and review that first"
        )
    old = package_version(package)
    new = next_version(old, args.how)
    writes: dict[Path, str] = {version_file(package): f'__version__ = "{new}"\n'}
    changelog = package / "CHANGELOG.md"
    if not changelog.is_file():
        raise BumpError(f"{changelog.relative_to(ROOT)} does not exist")
    writes[changelog] = changelog_release(changelog.read_text(), changelog, new, args.date, args.message)

    if package != meta:
        admitted, pin = pin_admits(pins, package.name, new)
        all_log = meta / "CHANGELOG.md"
        all_text = writes.get(all_log, all_log.read_text())
        new_pin = f"{package.name}>={new},<{parse(new)[0]}.{parse(new)[1] + 1}"
        all_text = note_unreleased(all_text, all_log, f"Pins {new_pin} (was {package.name}{pin}).")
        if not admitted:
            if not args.with_all:
                raise BumpError(
                    f"{package.name} {new} is outside the pin torchfix-all {package_version(meta)} has for it "
                    f"({package.name}{pin}): torchfix-all's users would never get it, its pins would be stale. "
                    "Re-run with --with-all to bump torchfix-all's minor version in the same change."
                )
            all_new = next_version(package_version(meta), "minor")
            writes[version_file(meta)] = f'__version__ = "{all_new}"\n'
            all_text = changelog_release(all_text, all_log, all_new, args.date, None)
        writes[all_log] = all_text
    elif args.with_all:
        raise BumpError("--with-all is for a member's bump; this is torchfix-all itself")

    for path, text in writes.items():
        path.write_text(text)
    generate.main([])
    if generate.main(["--check"]) != 0:
        raise BumpError("torchfix-all's pins are stale after the bump (scripts/generate.py --check)")
    for path in writes:
        print(f"wrote {path.relative_to(ROOT)}")
    tags = [f"{package.name}-v{new}"]
    if version_file(meta) in writes and package != meta:
        tags.append(f"{meta.name}-v{package_version(meta)}")
    print(f"{package.name}: {old} -> {new}. Review, commit, then push the tag(s): " + " ".join(tags))
    if len(tags) > 1:
        print("(push the member's tag first: torchfix-all's new pin resolves only once it is published)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
