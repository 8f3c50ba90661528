"""Version gating with ``packaging``: where was a fix validated? The one judgement of a range.

The registry's gate, the contract kit and the repository's compatibility tooling all call
:func:`judge` (and :func:`installed_version` for the library's version); nothing else compares a
version with a validated range. The answer only narrows the decision; the fix's probe says whether
the bug is present.

* Specifiers are always evaluated with ``prereleases=True``: packaging 26 changed the meaning of
  ``prereleases=None`` (pypa/packaging#895), and nightlies (``2.13.0.dev20260301``) and vendor
  builds (``2.13.0a0+gitabc.nv26.01``) are pre-releases.
* Local labels (``+cu130``, ``+cpu``) are ignored by ``packaging``, as they should be.
* When the full version and its ``base_version`` disagree (a nightly or vendor build of a release
  at the edge of the range) the verdict is ``ambiguous`` and the probe decides.
* An unparseable version is ``ambiguous`` too, never a crash.

``packaging`` is imported here, lazily: it costs about 5 ms, which activation must not pay.
"""

from __future__ import annotations

import sys

from torchfix_core._states import StrEnum


class Verdict(StrEnum):
    """Where a version stands against a validated range."""

    IN_RANGE = "in-range"
    OUT_OF_RANGE = "out-of-range"
    AMBIGUOUS = "ambiguous"


def judge(version: str, specifier: str) -> tuple[Verdict, str]:
    """Return ``(verdict, reason)`` for ``version`` against ``specifier``."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        return Verdict.AMBIGUOUS, f"validated range {specifier!r} is not a valid specifier"
    try:
        parsed = Version(str(version))
    except InvalidVersion:
        return Verdict.AMBIGUOUS, f"version {version!r} cannot be parsed; the probe decides"
    full = spec.contains(parsed, prereleases=True)
    base = spec.contains(Version(parsed.base_version), prereleases=True)
    if full and base:
        return Verdict.IN_RANGE, f"{version} is in the validated range {specifier}"
    if not full and not base:
        return Verdict.OUT_OF_RANGE, f"{version} is outside the validated range {specifier}"
    return Verdict.AMBIGUOUS, f"{version} is a pre-release at the edge of {specifier}; the probe decides"


def installed_version(module_name: str) -> str | None:
    """The version of the library imported as ``module_name``: its ``__version__`` when it is
    imported, else its distribution's metadata; ``None`` when neither says."""
    module = sys.modules.get(module_name)
    version = getattr(module, "__version__", None)
    if version is not None:
        return str(version)
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version

        return dist_version(module_name)
    except (PackageNotFoundError, ValueError):
        return None


def judge_installed(module_name: str, specifier: str, unversioned: bool = False) -> tuple[Verdict, str]:
    """:func:`judge` for the installed version of the library imported as ``module_name``.

    ``ambiguous`` (the probe decides) when the version is unknown, and when the library is
    ``unversioned`` (:class:`torchfix_core.FixSpec`): its version string does not identify its
    code, so the range only documents where the fix was validated."""
    version = installed_version(module_name)
    if version is None:
        return Verdict.AMBIGUOUS, f"{module_name} version unknown; the probe decides"
    if unversioned:
        return Verdict.AMBIGUOUS, (
            f"{module_name} reports {version}, a version that does not identify its code (the fix was "
            f"validated on {specifier}); the probe decides"
        )
    return judge(version, specifier)


def outside_range(targets: dict[str, str], unversioned: tuple[str, ...] = ()) -> str | None:
    """Why the installed libraries are outside ``targets`` (library -> validated range), or None
    when every known version is inside (an unknown, ambiguous or ``unversioned`` version: the
    probe decides)."""
    for module_name, specifier in targets.items():
        verdict, why = judge_installed(module_name, specifier, module_name in unversioned)
        if verdict is Verdict.OUT_OF_RANGE:
            return why
    return None
