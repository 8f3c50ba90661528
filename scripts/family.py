"""The one list of the family's distributions, for the repository's tooling.

``noxfile.py``, ``scripts/generate.py``, ``scripts/compatibility.py``, the release tools and the
family-shape test all ask this module which packages exist, instead of each globbing ``packages/``
with its own exclusions. Reads the source tree only (never imports a package).

* :func:`core` - ``packages/torchfix-core``
* :func:`fix_packages` - every fix distribution (``torchfix-<name>`` with a ``torchfix.fixes``
  entry point), by name
* :func:`meta_package` - ``packages/torchfix-all``
* :func:`member_packages` - core, then the fix packages: what ``torchfix-all`` depends on
* :func:`all_packages` - every distribution under ``packages/``: members, then ``torchfix-all``
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
CORE_NAME = "torchfix-core"
META_NAME = "torchfix-all"
_VERSION = re.compile(r'^__version__\s*=\s*"([^"]+)"', re.M)
_FIX_ENTRY_POINTS = re.compile(r'^\[project\.entry-points\."torchfix\.fixes"\]\s*$', re.M)
_ENTRY = re.compile(r'^\s*([A-Za-z0-9_.-]+)\s*=\s*"([^"]+)"\s*$')


def core() -> Path:
    return PACKAGES / CORE_NAME


def meta_package() -> Path:
    return PACKAGES / META_NAME


def fix_packages() -> list[Path]:
    """Every distribution under ``packages/`` that registers a ``torchfix.fixes`` entry point."""
    return sorted(
        p
        for p in PACKAGES.glob("torchfix-*")
        if (p / "pyproject.toml").is_file() and _FIX_ENTRY_POINTS.search((p / "pyproject.toml").read_text())
    )


def member_packages() -> list[Path]:
    """torchfix-core first, then the fix packages by name (what torchfix-all pins)."""
    return [core(), *fix_packages()]


def all_packages() -> list[Path]:
    """Every distribution of the family: core, the fixes, then torchfix-all."""
    return [*member_packages(), meta_package()]


def module_name(package: Path) -> str:
    """``torchfix_sac_replay`` for ``packages/torchfix-sac-replay``."""
    return package.name.replace("-", "_")


def version_file(package: Path) -> Path:
    return package / "src" / module_name(package) / "version.py"


def package_version(package: Path) -> str:
    """The version in the package's ``version.py`` (data only: read, never imported)."""
    match = _VERSION.search(version_file(package).read_text())
    if not match:
        raise SystemExit(f"{package}: version.py has no __version__")
    return match.group(1)


def fix_entry_points(package: Path) -> dict[str, str]:
    """The ``torchfix.fixes`` entry points ``package`` registers: fix id -> ``module:attribute``, in
    file order (a distribution may hold several fixes)."""
    text = (package / "pyproject.toml").read_text()
    match = _FIX_ENTRY_POINTS.search(text)
    if not match:
        return {}
    entries = {}
    for line in text[match.end() :].splitlines():
        if line.strip().startswith("["):
            break
        entry = _ENTRY.match(line)
        if entry:
            entries[entry.group(1)] = entry.group(2)
    return entries


def fix_ids(package: Path) -> list[str]:
    """The fix ids ``package`` registers (the names of its ``torchfix.fixes`` entry points)."""
    return list(fix_entry_points(package))


def family_members() -> dict[str, str]:
    """Every fix id of the family -> the distribution that provides it, by id."""
    members = {fix_id: package.name for package in fix_packages() for fix_id in fix_ids(package)}
    return dict(sorted(members.items()))


def by_name(name: str) -> Path:
    """The package directory of distribution ``name``; a clear error for an unknown name."""
    for package in all_packages():
        if package.name == name:
            return package
    known = ", ".join(p.name for p in all_packages())
    raise SystemExit(f"unknown distribution {name!r}; the family is: {known}")
