"""Version gating with ``packaging``: where was a fix validated?

The answer only narrows the decision; the fix's probe says whether the bug is present.

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

IN_RANGE = "in-range"
OUT_OF_RANGE = "out-of-range"
AMBIGUOUS = "ambiguous"


def judge(version: str, specifier: str) -> tuple[str, str]:
    """Return ``(verdict, reason)`` for ``version`` against ``specifier``."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        return AMBIGUOUS, f"validated range {specifier!r} is not a valid specifier"
    try:
        parsed = Version(str(version))
    except InvalidVersion:
        return AMBIGUOUS, f"version {version!r} cannot be parsed; the probe decides"
    full = spec.contains(parsed, prereleases=True)
    base = spec.contains(Version(parsed.base_version), prereleases=True)
    if full and base:
        return IN_RANGE, f"{version} is in the validated range {specifier}"
    if not full and not base:
        return OUT_OF_RANGE, f"{version} is outside the validated range {specifier}"
    return AMBIGUOUS, f"{version} is a pre-release at the edge of {specifier}; the probe decides"
