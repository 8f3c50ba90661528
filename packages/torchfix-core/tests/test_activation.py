"""Activation at import torch and its fallbacks, each in a fresh interpreter with real torch and
the test-tree fixes installed as real distributions."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Callable

import pytest
from torchfix_core.testing import clean_environ

TORCH_MODULES = "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))))"


@pytest.fixture
def last_line(run_py) -> Callable[..., str]:
    """Run a snippet as ``run_py`` does (same keywords); the last line it printed, where each
    snippet prints its result."""
    return lambda code, **kwargs: run_py(code, **kwargs).stdout.strip().splitlines()[-1]


def states(report: dict) -> dict[str, str]:
    return {f["id"]: f["state"] for f in report["fixes"]}


def test_import_torch_activates_without_importing_any_extra_torch_module(run_py) -> None:
    code = (
        "import json, sys, torch\n"
        "import torchfix_core; from torchfix_core import _registry, status\n"
        f"{TORCH_MODULES}\n"
        "print(json.dumps(torchfix_core.activation().as_dict()))\n"
        "print(json.dumps({r.id: r.state for r in status()}))\n"
    )
    proc = run_py(code)
    loaded, activation, state = (json.loads(line) for line in proc.stdout.strip().splitlines()[-3:])
    baseline = json.loads(run_py(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).stdout.strip().splitlines()[-3])
    assert sorted(set(loaded) - set(baseline)) == []
    assert not any(m.startswith(("torch._dynamo", "torch._inductor")) for m in loaded)
    assert activation["source"] == "torch.backends"
    assert state["demo-checkpoint"] == "applied"  # trigger already imported by import torch
    assert state["demo-dynamo"] == "pending"  # waits for torch._dynamo


def test_acceptance_one_liner_prints_false(last_line) -> None:
    one_liner = "import torch, sys; print(any(m.startswith(('torch._dynamo','torch._inductor')) for m in sys.modules))"
    assert last_line(one_liner) == "False"


def test_pending_fix_applies_when_its_trigger_is_imported(last_line) -> None:
    printed = last_line(
        "import torch, torch._dynamo, json\n"
        "from torchfix_demo_dynamo.patch import CALLS\n"
        "torch._dynamo.reset()\n"
        "rows = {r.id: r for r in __import__('torchfix_core').status()}\n"
        "print(json.dumps([rows['demo-dynamo'].state, rows['demo-dynamo'].reason, CALLS['reset']]))\n"
    )
    state, reason, calls = json.loads(printed)
    assert state == "applied" and calls == 1
    assert reason.endswith("; torch._dynamo.reset called 1 time(s)")  # Fix.runtime_note


def test_doctor_json_lists_the_test_tree_fixes_with_their_states(run_py, doctor_json) -> None:
    report = doctor_json()
    assert report["activation"]["source"] == "torch.backends"
    got = states(report)
    assert got["demo-checkpoint"] == "applied" and got["demo-dynamo"] == "applied"
    assert got["autotune"] in (
        "not-installed",
        "applied",
        "not-needed",
        "pending",
        "out-of-range",
    )  # 2.10: out-of-range
    row = next(f for f in report["fixes"] if f["id"] == "demo-dynamo")
    assert row["version"] == "0.0.1" and row["targets"] == {"torch": ">=2.5,<2.99"}
    assert row["upstream"] == ["https://example.invalid/demo-dynamo"] and row["reason"]


def test_doctor_no_resolve_leaves_lazy_fixes_pending(run_py) -> None:
    proc = run_py("from torchfix_core._doctor import main; main(['--json', '--no-resolve'])")
    assert states(json.loads(proc.stdout))["demo-dynamo"] == "pending"


def test_torchfix_autoload_0_turns_activation_off(run_py, doctor_json) -> None:
    report = doctor_json(env={"TORCHFIX_AUTOLOAD": "0"})
    assert report["activation"] == {"source": "off", "detail": "TORCHFIX_AUTOLOAD=0"}
    assert states(report)["demo-checkpoint"] == "pending"
    assert "not activated" in next(f["reason"] for f in report["fixes"] if f["id"] == "demo-checkpoint")


def test_disable_env_shows_disabled_with_reason(run_py, doctor_json) -> None:
    report = doctor_json(env={"TORCHFIX_DISABLE": "demo-dynamo"})
    row = next(f for f in report["fixes"] if f["id"] == "demo-dynamo")
    assert row["state"] == "disabled" and "TORCHFIX_DISABLE" in row["reason"]


def test_torch_autoload_off_then_auto_module_activates(last_line, doctor_json) -> None:
    off = doctor_json(env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert off["activation"]["source"] == "off" and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in off["activation"]["detail"]
    printed = last_line(
        "import torchfix_core.auto, sys\n"
        "assert 'torch' not in sys.modules\n"
        "import torch, json\n"
        "import torchfix_core; from torchfix_core import _registry, status\n"
        "print(json.dumps([torchfix_core.activation().source, {r.id: r.state for r in status()}]))\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    source, state = json.loads(printed)
    assert source == "torchfix_core.auto" and state["demo-checkpoint"] == "applied"


def test_auto_module_after_torch_activates_at_once(last_line) -> None:
    printed = last_line(
        "import torch, json\nimport torchfix_core.auto\nimport torchfix_core; from torchfix_core import _registry\n"
        "print(torchfix_core.activation().source)\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert printed == "torchfix_core.auto"


def test_launcher_activates_in_child_processes() -> None:
    code = (
        "import subprocess, sys, json\n"
        "child = subprocess.run([sys.executable, '-c', 'import torch; import torchfix_core; from torchfix_core import _registry; "
        "print(torchfix_core.activation().source)'], capture_output=True, text=True)\n"
        "print(child.stdout.strip())\n"
    )
    env = clean_environ({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    proc = subprocess.run(
        [sys.executable, "-m", "torchfix_core._launcher", "--", sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "torchfix-run"


def test_launcher_usage_and_missing_command() -> None:
    from torchfix_core._launcher import main

    assert main([]) == 2
    assert main(["--", "/definitely/not/a/command"]) == 127


def test_reentrant_import_of_torch_inside_activation_is_harmless(last_line) -> None:
    # a fix whose probe imports torch again while activation runs: activation must not recurse
    printed = last_line(
        "import torchfix_core\n"
        "import torchfix_core; from torchfix_core import _registry\n"
        "calls = []\n"
        "orig = _registry.activate\n"
        "def spy(source):\n"
        "    calls.append(str(source))\n"
        "    import torch  # re-entrant\n"
        "    orig(source)\n"
        "    orig(source)\n"
        "_registry.activate = spy\n"
        "import torch\n"
        "print(calls, torchfix_core.activation().source)\n"
    )
    assert printed == "['torch.backends'] torch.backends"


def test_strict_mode_and_api_errors(run_py) -> None:
    proc = run_py(
        "import torch\nimport torchfix_core\n"
        "try:\n    torchfix_core.apply(only=['nope'])\nexcept torchfix_core.TorchfixError as e:\n    print('ERR', e)\n"
    )
    assert "ERR unknown fix id(s) ['nope']" in proc.stdout


def test_a_new_fix_needs_no_change_to_the_core(last_line) -> None:
    """What adding a fix takes, shown by the test-tree fixtures alone (the core names none of them):
    its own switch is validated (declared in its FixSpec), and a family it declares lists an absent
    member as not-installed."""
    code = (
        "import json, warnings\nwarnings.simplefilter('always')\nimport torch, torchfix_core\n"
        "from torchfix_core import _registry\n"
        "rows = {r.id: r.state for r in torchfix_core.status()}\n"
        "print(json.dumps([rows, _registry.settings().problems]))\n"
    )
    rows, problems = json.loads(last_line(code))
    assert rows["demo-absent"] == "not-installed" and rows["demo-checkpoint"] == "applied", rows
    assert problems == []
    rows, problems = json.loads(last_line(code, env={"TORCHFIX_DEMO_CHECKPOINT_VERBOSE": "loud"}))
    assert len(problems) == 1 and "TORCHFIX_DEMO_CHECKPOINT_VERBOSE='loud' is not a boolean" in problems[0]


_MISSING_TRIGGER = """
import json, sys
import torch
if sys.argv[1] == "old":
    torch.__version__ = "0.1.0"  # below demo-dynamo's validated range
class Absent:  # torch._dynamo "does not exist": finding it raises what a missing module raises
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torch._dynamo":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent)
from torchfix_core._doctor import collect
report = collect()
row = next(f for f in report["fixes"] if f["id"] == "demo-dynamo")
print(json.dumps({"state": row["state"], "reason": row["reason"], "errors": report["trigger_import_errors"]}))
"""


def test_doctor_settles_a_fix_whose_trigger_module_does_not_exist() -> None:
    """A trigger module absent from the installation (torch 2.8 has no ``torch._dynamo.aot_compile``)
    would leave its fix pending forever; doctor judges it: ``not-needed`` inside the validated range,
    ``out-of-range`` outside it."""
    from torchfix_core.testing import run_json_script

    inside = run_json_script(["-c", _MISSING_TRIGGER, "current"])
    assert inside["state"] == "not-needed", inside
    assert "torch._dynamo does not exist in this installation" in inside["reason"], inside
    assert "torch._dynamo" in inside["errors"], inside
    old = run_json_script(["-c", _MISSING_TRIGGER, "old"])
    assert old["state"] == "out-of-range", old
    assert "0.1.0 is outside the validated range" in old["reason"], old
