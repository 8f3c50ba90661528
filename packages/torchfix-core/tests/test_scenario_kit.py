"""The scenario runner of the test kit (torchfix_core.testing._scenario and .fixtures)."""

from __future__ import annotations

import os
from typing import Any, Mapping

import pytest
from torchfix_core import testing as kit
from torchfix_core.testing.fixtures import with_and_without_fix

ECHO_ENV = (
    "import json, os; print('noise'); print(json.dumps({k: v for k, v in os.environ.items() if 'TORCHFIX' in k}))"
)


def test_clean_environ_drops_the_callers_torchfix_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHFIX_DISABLE", "all")
    monkeypatch.setenv("TORCHFIX_LOG", "debug")
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    env = kit.clean_environ({"TORCHFIX_STRICT": "1"})
    assert {k for k in env if k.startswith("TORCHFIX_")} == {"TORCHFIX_STRICT"}
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert env["PATH"] == os.environ["PATH"]


def test_switches_name_the_documented_variables() -> None:
    assert kit.fix_switch("my-fix", True) == {"TORCHFIX_MY_FIX_ENABLED": "1"}
    assert kit.only_fix("my-fix", False) == {"TORCHFIX_DISABLE": "all", "TORCHFIX_MY_FIX_ENABLED": "0"}


def test_run_json_script_returns_the_last_line_in_a_clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHFIX_FORCE", "all")
    got = kit.run_json_script(["-c", ECHO_ENV], env=kit.only_fix("my-fix", True), timeout=60)
    assert got == {"TORCHFIX_DISABLE": "all", "TORCHFIX_MY_FIX_ENABLED": "1"}


@pytest.mark.parametrize(
    "code, message",
    [
        ("import sys; print('partial'); sys.exit(3)", "exited 3"),
        ("pass", "exited 0"),  # no output at all
        ("print('[1, 2]')", "not a JSON object"),
    ],
)
def test_run_json_script_fails_with_the_output(code: str, message: str) -> None:
    with pytest.raises(kit.ScenarioFailed, match=message):
        kit.run_json_script(["-c", code], timeout=60)
    assert issubclass(kit.ScenarioFailed, AssertionError)  # a test failure, not an error


def test_timed_run_reports_a_crash_instead_of_raising() -> None:
    ok = kit.run_json_script_timed(["-c", "print('{\"ok\": true}')"], timeout=60)
    assert ok["ok"] is True and ok["seconds"] > 0
    crashed = kit.run_json_script_timed(["-c", "raise KeyError('gone')"], timeout=60)
    assert crashed["ok"] is False and "KeyError: 'gone'" in crashed["error"] and crashed["seconds"] > 0


def test_describe_failure_names_the_error_type_and_first_line() -> None:
    result = {"error_type": "torch.utils.checkpoint.CheckpointError", "error": "Recomputed values differ\nmore"}
    assert kit.describe_failure(result) == "CheckpointError: Recomputed values differ"
    assert kit.describe_failure({"error": "x" * 300}, width=10) == "error: " + "x" * 10


def test_demo_line_describes_a_run_and_shows_a_failure_by_its_error() -> None:
    def describe(r: Mapping[str, Any]) -> str:
        return f"red {r['red']}"

    assert kit.demo_line("without:", describe, {"ok": True, "red": 3}) == "  without:" + " " * 10 + " red 3"
    failed = {"ok": False, "error_type": "builtins.RuntimeError", "error": "boom\ntrace"}
    assert kit.demo_line("with:", describe, failed) == "  with:" + " " * 13 + " RuntimeError: boom"


_CALLS: list[bool] = []


def _record(*, fix: bool) -> dict[str, Any]:
    _CALLS.append(fix)
    return {"fix": fix}


with_fix, without_fix = with_and_without_fix(_record, scope="module")


def test_fixture_pair_runs_each_side_once_per_scope(with_fix: dict[str, Any], without_fix: dict[str, Any]) -> None:
    assert with_fix == {"fix": True} and without_fix == {"fix": False}


def test_fixture_pair_is_cached_in_its_scope(with_fix: dict[str, Any], without_fix: dict[str, Any]) -> None:
    assert sorted(_CALLS) == [False, True], _CALLS


def test_recorded_gpu_run_prints_versions_scenarios_and_outcomes(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "gpu.log"
    log.write_text(
        "torch 9.9 H200\nnoise\n"
        'gpu scenario, fix off: {"red": 3}\n'
        'gpu scenario, fix on: {"red": 0}\n'
        "PASSED pkg/tests/test_gpu.py::test_fails_without_fix\n"
        "FAILED pkg/tests/test_gpu.py::test_passes_with_fix - assert\n"
    )
    kit.print_recorded_gpu_run(log, lambda label, r: f"{label}: red {r['red']}")
    assert capsys.readouterr().out.splitlines() == [
        "  no CUDA GPU here; recorded on a CUDA GPU (gpu.log):",
        "    torch 9.9 H200",
        "    fix off: red 3",
        "    fix on: red 0",
        "    test_fails_without_fix: PASSED",
        "    test_passes_with_fix - assert: FAILED",
    ]
    kit.print_recorded_gpu_run(tmp_path / "absent.log", lambda label, r: "")
    assert "(log not in this checkout)" in capsys.readouterr().out


@pytest.mark.parametrize("cuda", [False, True])
def test_gpu_fix_demo_runs_the_gpu_check_or_shows_the_recorded_run_and_the_cpu_check(
    cuda: bool, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    log = tmp_path / "gpu.log"
    log.write_text('torch 9.9 H200\ngpu scenario, fix off: {"red": 3}\n')

    def check(kind: str) -> kit.DemoCheck:
        return kit.DemoCheck(f"{kind} check:", lambda fix: {"ok": True, "fix": fix}, lambda r: f"{kind} {r['fix']}")

    kit.print_gpu_fix_demo(
        "title",
        gpu=check("gpu"),
        recorded=(log, lambda label, r: f"{label}: red {r['red']}"),
        cpu=check("cpu"),
    )
    kind = "gpu" if cuda else "cpu"
    recorded = (
        []
        if cuda
        else ["  no CUDA GPU here; recorded on a CUDA GPU (gpu.log):", "    torch 9.9 H200", "    fix off: red 3"]
    )
    assert capsys.readouterr().out.splitlines() == [
        "== title ==",
        *recorded,
        f"  {kind} check:",
        f"  {'without the fix:':<18} {kind} False",
        f"  {'with the fix:':<18} {kind} True",
    ]


def test_applied_where_decides_the_contract_state_once_and_lazily() -> None:
    calls: list[int] = []

    def check(present: bool) -> Any:
        return lambda: calls.append(1) or present

    class Present(kit.FixContract):
        fix_id = "x"
        patched = []
        expected_state = kit.applied_where(check(True))

    class Absent(kit.FixContract):
        fix_id = "y"
        patched = []
        expected_state = kit.applied_where(check(False))

    assert calls == []  # nothing called at class creation (collection)
    assert Present.expected_state == "applied" and Present().expected_state == "applied"
    assert Absent().expected_state == "not-needed"
    assert len(calls) == 2


def test_applied_report_checks_a_green_run_both_where_the_bug_is_and_is_not() -> None:
    applied = {"ok": True, "report": {"state": "applied", "acted": 2, "events": {"e": 2}}}
    idle = {"ok": True, "report": {"state": "not-needed", "acted": 0, "events": {}}}
    assert kit.applied_report(applied, True) == applied["report"]
    assert kit.applied_report(idle, False) is None
    for result, present in ((idle, True), (applied, False), ({**applied, "ok": False}, True)):
        with pytest.raises(AssertionError):
            kit.applied_report(result, present)
