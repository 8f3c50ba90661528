"""The contract every fix passes: pytest side (spawns one subprocess per case)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import ClassVar, Mapping, Sequence

from torchfix_core.testing._introspect import outside_validated_range

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

    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    child_env.update(case_env(case, fix_id))
    child_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "torchfix_core.testing._cases", json.dumps(config)],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"contract case {case!r} for {fix_id!r} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


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
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    proc = subprocess.run(
        [sys.executable, "-c", _ABSENT_LIBRARY_CHECK, fix_id, library],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(f"status check for {fix_id!r} failed (exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


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
    return "applied" if bug_present else "not-needed"


class FixContract:
    """Mix-in of contract tests. Set ``fix_id`` and ``patched``; override ``expected_state``
    (``"applied"`` or ``"not-needed"``: what the probe decides) where the bug is absent on the
    installed version.

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

    def test_contract_activated_at_import_torch(self) -> None:
        self._run("activated_at_import_torch")

    def test_contract_import_then_apply(self) -> None:
        self._run("import_then_apply")

    def test_contract_apply_then_import(self) -> None:
        self._run("apply_then_import")

    def test_contract_apply_twice(self) -> None:
        self._run("apply_twice")

    def test_contract_apply_revert_apply(self) -> None:
        self._run("apply_revert_apply")

    def test_contract_revert_first(self) -> None:
        self._run("revert_first")

    def test_contract_disabled_by_env(self) -> None:
        self._run("disabled_by_env")

    def test_contract_disabled_by_enabled_flag(self) -> None:
        self._run("disabled_by_enabled_flag")

    def test_contract_out_of_range_noop(self) -> None:
        self._run("out_of_range_noop")

    def test_contract_forced_out_of_range(self) -> None:
        self._run("forced_out_of_range")

    def test_contract_probe_false_noop(self) -> None:
        self._run("probe_false_noop")

    def test_contract_failure_rolls_back(self) -> None:
        self._run("failure_rolls_back")

    def test_contract_strict_failure_raises(self) -> None:
        self._run("strict_failure_raises")
