"""Version gating accepts local tags, nightlies and vendor builds (BRIEF.md section 1.4)."""

import pytest
from torchfix_core._versions import Verdict, judge

AMBIGUOUS, IN_RANGE, OUT_OF_RANGE = Verdict.AMBIGUOUS, Verdict.IN_RANGE, Verdict.OUT_OF_RANGE


@pytest.mark.parametrize(
    "version, spec, verdict",
    [
        ("2.13.0", ">=2.12,<2.16", IN_RANGE),
        ("2.13.0+cpu", ">=2.12,<2.16", IN_RANGE),
        ("2.15.0+cu132", ">=2.12,<2.16", IN_RANGE),
        ("2.11.0+cu130", ">=2.12,<2.16", OUT_OF_RANGE),
        ("2.16.0", ">=2.12,<2.16", OUT_OF_RANGE),
        ("2.6.0+cu124", ">=2.5,<2.8", IN_RANGE),
        ("2.6.0a0+ecf3bae40a.nv25.01", ">=2.5,<2.8", IN_RANGE),  # NGC
        ("2.7.0.dev20250301+cu126", ">=2.5,<2.8", IN_RANGE),  # nightly inside the range
        ("2.8.0.dev20250601", ">=2.5,<2.8", OUT_OF_RANGE),  # nightly of the excluded bound
        ("2.12.0a0+git1234.nv26.01", ">=2.12,<2.16", AMBIGUOUS),  # vendor build of the lower bound
        ("2.12.0.dev20260101", ">=2.12,<2.16", AMBIGUOUS),
        ("not-a-version", ">=2.12", AMBIGUOUS),
    ],
)
def test_judge(version: str, spec: str, verdict: str) -> None:
    got, reason = judge(version, spec)
    assert got == verdict, reason
    assert reason


def test_invalid_specifier_is_ambiguous_not_a_crash() -> None:
    assert judge("2.13.0", "~~2")[0] == AMBIGUOUS


def test_an_unversioned_library_is_judged_by_the_probe_whatever_it_reports(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A library declared ``unversioned`` (its builds all report one version, or 0.0.0) is never
    out of range: the verdict is ambiguous, the reason names the reported version and the range."""
    import sys
    import types

    from torchfix_core._versions import judge_installed, outside_range

    monkeypatch.setitem(sys.modules, "some_lib", types.SimpleNamespace(__version__="0.0.0"))
    assert judge_installed("some_lib", ">=1.0,<2")[0] == OUT_OF_RANGE
    verdict, reason = judge_installed("some_lib", ">=1.0,<2", unversioned=True)
    assert verdict == AMBIGUOUS
    assert "some_lib reports 0.0.0" in reason and ">=1.0,<2" in reason and "the probe decides" in reason
    assert outside_range({"some_lib": ">=1.0,<2"}) is not None
    assert outside_range({"some_lib": ">=1.0,<2"}, unversioned=("some_lib",)) is None
    monkeypatch.delitem(sys.modules, "some_lib")
    assert judge_installed("some_lib", ">=1.0,<2")[0] == AMBIGUOUS  # not installed: unknown, the probe decides
