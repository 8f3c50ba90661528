"""The contract every fix passes: pytest side (spawns one subprocess per case)."""

from __future__ import annotations

import json
from typing import Callable, ClassVar, Mapping, Sequence

from torchfix_core.testing._introspect import outside_validated_range
from torchfix_core.testing._scenario import ScenarioFailed, run_json_script

CASES = (
    "activated_at_import_torch",
    "import_then_apply",
    "apply_then_import",
    "apply_twice",
    "apply_revert_apply",
    "revert_first",
    "disabled_by_env",
    "disabled_by_enabled_flag",
    "out_of_range_noop",
    "forced_out_of_range",
    "probe_false_noop",
    "failure_rolls_back",
    "strict_failure_raises",
)


def run_case(
    case: str,
    fix_id: str,
    patched: Sequence[tuple[str, str]],
    expected_state: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> dict[str, object]:
    """Run one contract case in a fresh interpreter; raise AssertionError with its output on failure."""
    config = {"case": case, "fix_id": fix_id, "patched": [list(p) for p in patched], "expected": expected_state}
    from torchfix_core.testing._cases import case_env

    argv = ["-m", "torchfix_core.testing._cases", json.dumps(config)]
    try:
        return run_json_script(argv, env={**case_env(case, fix_id), **(env or {})}, timeout=timeout)
    except ScenarioFailed as exc:
        raise AssertionError(f"contract case {case!r} for {fix_id!r} failed: {exc}") from None


# Cases that apply the fix under its own range check: on a library outside the validated range the
# fix is (correctly) out-of-range there, and only the forced case can apply it.
IN_RANGE_CASES = frozenset(
    {
        "import_then_apply",
        "apply_then_import",
        "apply_twice",
        "apply_revert_apply",
        "revert_first",
        "probe_false_noop",
        "failure_rolls_back",
        "strict_failure_raises",
    }
)


_ABSENT_LIBRARY_CHECK = """
import json, sys
import torch
import torchfix_core
from torchfix_core.testing import fix_spec
fix_id, library = sys.argv[1], sys.argv[2]
row = next(r for r in torchfix_core.status() if r.id == fix_id)
implementation = fix_spec(fix_id).implementation.partition(":")[0]
print(json.dumps({"state": str(row.state), "reason": row.reason,
                  "implementation_loaded": implementation in sys.modules,
                  "library_loaded": any(m == library or m.startswith(library + ".") for m in sys.modules)}))
"""


def status_without_library(fix_id: str, library: str, timeout: float = 300) -> dict[str, object]:
    """``import torch`` in a fresh interpreter (default activation) where ``library`` is absent:
    ``fix_id``'s state and reason, and whether its implementation module or the library got imported
    (a fix for an absent library must be ``not-installed`` and cost nothing)."""
    try:
        return run_json_script(["-c", _ABSENT_LIBRARY_CHECK, fix_id, library], timeout=timeout)
    except ScenarioFailed as exc:
        raise AssertionError(f"status check for {fix_id!r} failed: {exc}") from None


_LIBRARY_VERSION_CHECK = """
import importlib, json, sys
fix_id, library, version = sys.argv[1], sys.argv[2], sys.argv[3]
import torch  # TORCHFIX_AUTOLOAD=0: nothing judged yet
module = importlib.import_module(library)
module.__version__ = version  # what the version gate reads first
import torchfix_core
from torchfix_core.testing import import_triggers
torchfix_core.apply(only=[fix_id])
import_triggers(fix_id)
row = next(r for r in torchfix_core.status() if r.id == fix_id)
print(json.dumps({"state": str(row.state), "reason": row.reason}))
"""


def status_with_library_version(fix_id: str, library: str, version: str, timeout: float = 600) -> dict[str, object]:
    """``fix_id``'s state and reason in a fresh interpreter where the installed ``library`` reports
    ``version`` (its ``__version__`` set before the fix is applied; activation at ``import torch``
    off, then :func:`torchfix_core.apply` and its triggers imported): how the version gate and the probe judge a release the
    library's metadata names wrongly or not at all (e.g. a checkout that builds as ``0.0.0``)."""
    try:
        return run_json_script(
            ["-c", _LIBRARY_VERSION_CHECK, fix_id, library, version], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=timeout
        )
    except ScenarioFailed as exc:
        raise AssertionError(f"status check for {fix_id!r} with {library} {version} failed: {exc}") from None


def assert_version_does_not_decide(fix_id: str, library: str, version: str, expected_state: str) -> None:
    """``fix_id`` declares ``library`` ``unversioned`` (:class:`torchfix_core.FixSpec`): where the
    library reports ``version`` (inside its documented range or not) the fix reaches
    ``expected_state`` (the probe's decision) and its reason names the reported version
    (:func:`status_with_library_version`)."""
    row = status_with_library_version(fix_id, library, version)
    assert row["state"] == expected_state, row
    assert f"{library} reports {version}, a version that does not identify its code" in str(row["reason"]), row


def assert_inert_without(fix_id: str, library: str) -> None:
    """Where ``library`` is absent, ``fix_id`` is ``not-installed`` (reason: ``<library> is not
    installed``) and neither its implementation nor the library was imported (see
    :func:`status_without_library`)."""
    row = status_without_library(fix_id, library)
    assert row == {
        "state": "not-installed",
        "reason": f"{library} is not installed",
        "implementation_loaded": False,
        "library_loaded": False,
    }, row


def state_to_expect(fix_id: str, bug_present: bool) -> str:
    """The state ``fix_id`` must reach on the installed libraries once its trigger has fired:
    ``out-of-range`` outside its validated range (the range check answers before the probe), else
    ``applied`` where the bug is present and ``not-needed`` where it is not. ``bug_present`` must come
    from the test's own reproduction or live check, never from the fix's probe."""
    if outside_validated_range(fix_id):
        return "out-of-range"
    return _probe_decision(bug_present)


def _probe_decision(bug_present: bool) -> str:
    """What a fix's probe must decide: ``applied`` where the bug is present, else ``not-needed``."""
    return "applied" if bug_present else "not-needed"


class applied_where:  # noqa: N801 - read as a declaration: ``expected_state = applied_where(bug_present)``
    """A :class:`FixContract`'s ``expected_state`` decided by the test's own check of the bug:
    ``"applied"`` where ``bug_present()`` is true, else ``"not-needed"``. ``bug_present`` (the
    test's reproduction or live check, never the fix's probe) is called once, when a case first
    runs, not at collection, so an expensive check costs nothing where the contract is deselected."""

    def __init__(self, bug_present: Callable[[], bool]) -> None:
        self._bug_present = bug_present
        self._state: str | None = None

    def __get__(self, instance: object, owner: type | None = None) -> str:
        if self._state is None:
            self._state = _probe_decision(self._bug_present())
        return self._state


class FixContract:
    """Mix-in of contract tests. Set ``fix_id`` and ``patched``; override ``expected_state``
    (``"applied"`` or ``"not-needed"``: what the probe decides) where the bug is absent on the
    installed version, usually as ``expected_state = applied_where(bug_present)``.

    On a library outside the fix's validated range (e.g. torch 2.10 for a fix validated from 2.11)
    the fix must stay ``out-of-range`` at ``import torch``; the cases that apply it through its
    range check are skipped there, and ``forced_out_of_range`` (``TORCHFIX_FORCE``) shows that the
    probe still decides ``expected_state``."""

    fix_id: ClassVar[str]
    patched: ClassVar[Sequence[tuple[str, str]]]
    expected_state: ClassVar[str] = "applied"
    extra_env: ClassVar[Mapping[str, str]] = {}
    _range_checked: ClassVar[dict[str, str | None]] = {}

    def _outside_range(self) -> str | None:
        if self.fix_id not in FixContract._range_checked:
            FixContract._range_checked[self.fix_id] = outside_validated_range(self.fix_id)
        return FixContract._range_checked[self.fix_id]

    def _run(self, case: str) -> dict[str, object]:
        expected = self.expected_state
        outside = self._outside_range()
        if outside is not None:
            if case in IN_RANGE_CASES:
                import pytest

                pytest.skip(f"outside the validated range ({outside}): covered by forced_out_of_range")
            if case == "activated_at_import_torch":
                expected = "out-of-range"
        return run_case(case, self.fix_id, self.patched, expected, self.extra_env)


def _case_test(case: str) -> Callable[[FixContract], None]:
    def test(self: FixContract) -> None:
        self._run(case)

    test.__name__ = f"test_contract_{case}"
    test.__qualname__ = f"FixContract.{test.__name__}"
    test.__doc__ = f"The contract's {case!r} case for this fix, in a fresh interpreter."
    return test


# One test method per case, named test_contract_<case> (the names reports and docs quote).
for _case in CASES:
    setattr(FixContract, f"test_contract_{_case}", _case_test(_case))
