"""Fault suite, second half: every ``TORCHFIX_*`` variable given a malformed and an unknown value,
every fallback activation path with torch's backend autoload off, and revert proven against an
independent snapshot of torch (not torchfix's own bookkeeping). Each case runs in a fresh interpreter
with whatever fixes are installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
PRELUDE = f"import sys; sys.path.insert(0, {str(HERE)!r})\nfrom _fault_helpers import *\n"
KNOWN_STATES = {"applied", "pending", "not-needed", "out-of-range", "disabled", "failed", "not-installed"}


def last_json(proc: subprocess.CompletedProcess) -> Any:
    return json.loads(proc.stdout.strip().splitlines()[-1])


# every variable torchfix-core knows (its own, the per-fix switch, the launcher's, the ones a fix
# package reads itself) plus an unknown name, each with a malformed value (not one value of the
# right syntax) and an unknown one (well formed, not accepted)
ENV_CASES = [
    ("TORCHFIX_AUTOLOAD", "malformed", "1 0"),
    ("TORCHFIX_AUTOLOAD", "unknown", "perhaps"),
    ("TORCHFIX_STRICT", "malformed", "on,off"),
    ("TORCHFIX_STRICT", "unknown", "very"),
    ("TORCHFIX_DISABLE", "malformed", "sac-replay,,autotune"),
    ("TORCHFIX_DISABLE", "unknown", "no-such-fix"),
    ("TORCHFIX_FORCE", "malformed", ",,"),
    ("TORCHFIX_FORCE", "unknown", "no-such-fix"),
    ("TORCHFIX_LOG", "malformed", "debug,info"),
    ("TORCHFIX_LOG", "unknown", "shout"),
    ("TORCHFIX_SAC_REPLAY_ENABLED", "malformed", "1 1"),
    ("TORCHFIX_SAC_REPLAY_ENABLED", "unknown", "maybe"),
    ("TORCHFIX_NO_SUCH_FIX_ENABLED", "malformed", "x y"),
    ("TORCHFIX_NO_SUCH_FIX_ENABLED", "unknown", "1"),
    ("TORCHFIX_ACTIVATION_SOURCE", "malformed", "torchfix-run,torchfix-run"),
    ("TORCHFIX_ACTIVATION_SOURCE", "unknown", "torch.backends"),
    ("TORCHFIX_AOT_FALLBACK_STRICT", "malformed", "1 0"),
    ("TORCHFIX_AOT_FALLBACK_STRICT", "unknown", "strict"),
    ("TORCHFIX_AOT_FALLBACK_MEMO", "malformed", "on off"),
    ("TORCHFIX_AOT_FALLBACK_MEMO", "unknown", "sometimes"),
    ("TORCHFIX_", "malformed", "1"),
    ("TORCHFIX_NO_SUCH_SWITCH", "unknown", "1"),
]


@pytest.mark.parametrize(("name", "value"), [pytest.param(n, v, id=f"{n}-{kind}") for n, kind, v in ENV_CASES])
def test_every_variable_malformed_or_unknown_warns_once_naming_it_and_doctor_runs(
    python, name: str, value: str
) -> None:
    proc = python(
        "import warnings\nwarnings.simplefilter('always')\nimport torch\n"
        "torch.ones(2).sum()\n"
        "from torchfix_core._doctor import main\nmain(['--json'])\n",
        env={name: value},
    )
    report = json.loads(proc.stdout)
    assert report["torch"]["installed"]
    assert report["activation"]["source"] == "torch.backends"
    problems = report["environment_problems"]
    assert len(problems) == 1 and name in problems[0], problems
    warnings = [line for line in proc.stderr.splitlines() if "TorchfixConfigWarning" in line]
    assert len(warnings) == 1 and name in warnings[0], proc.stderr
    for row in report["fixes"]:
        assert row["state"] in KNOWN_STATES - {"failed"}, row


def test_unknown_activation_source_does_not_relabel_the_auto_path(python) -> None:
    proc = python(
        "import json, warnings\nwarnings.simplefilter('always')\nimport torchfix_core.auto\nimport torch\n"
        "from torchfix_core import _env, _registry\n"
        "print(json.dumps([torchfix_core.activation().source, _registry.settings().problems,\n"
        "                  _env.requested_activation_source() == 'torchfix_core.auto']))\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCHFIX_ACTIVATION_SOURCE": "torch.backends"},
    )
    source, problems, read_as_auto = last_json(proc)
    assert source == "torchfix_core.auto" and read_as_auto
    assert len(problems) == 1 and "TORCHFIX_ACTIVATION_SOURCE" in problems[0]


FINAL_STATES = (
    PRELUDE
    + "import_all_triggers()\nimport torchfix_core; from torchfix_core import _registry\nemit(source=torchfix_core.activation().source, states=states())\n"
)


@pytest.fixture(scope="module")
def baseline_states() -> dict[str, str]:
    """Every fix's final state with the default activation (torch's autoload, torch.backends)."""
    code = "import torch\n" + FINAL_STATES
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc)
    assert isinstance(result, dict) and result["source"] == "torch.backends"
    return result["states"]  # type: ignore[no-any-return]


def _launcher(*child: str) -> list[str]:
    return ["-m", "torchfix_core._launcher", "--", sys.executable, *child]


# name -> (interpreter arguments or None for `-c code`, code, extra environment, expected source)
FALLBACK_PATHS: dict[str, tuple[list[str] | None, str, dict[str, str], str]] = {
    "auto-before-torch": (None, "import torchfix_core.auto\nimport torch\n", {}, "torchfix_core.auto"),
    "auto-after-torch": (None, "import torch\nimport torchfix_core.auto\n", {}, "torchfix_core.auto"),
    "api-activate-after-torch": (None, "import torch, torchfix_core\ntorchfix_core.activate()\n", {}, "api"),
    "api-activate-before-torch": (None, "import torchfix_core\ntorchfix_core.activate()\nimport torch\n", {}, "api"),
    "torchfix-run": (_launcher("-c", "import torch\n" + FINAL_STATES), "", {}, "torchfix-run"),
    # explicit requests ignore TORCHFIX_AUTOLOAD=0
    "torchfix-run-torchfix-autoload-0": (
        _launcher("-c", "import torch\n" + FINAL_STATES),
        "",
        {"TORCHFIX_AUTOLOAD": "0"},
        "torchfix-run",
    ),
    "auto-torchfix-autoload-0": (
        None,
        "import torchfix_core.auto\nimport torch\n",
        {"TORCHFIX_AUTOLOAD": "0"},
        "torchfix_core.auto",
    ),
}


@pytest.mark.parametrize("path", sorted(FALLBACK_PATHS))
def test_torch_autoload_off_every_fallback_path_reaches_the_default_states(
    python, baseline_states: dict[str, str], path: str
) -> None:
    args, code, env, source = FALLBACK_PATHS[path]
    proc = python(code + FINAL_STATES, args=args, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env})
    result = last_json(proc)
    assert isinstance(result, dict)
    assert result["source"] == source
    assert result["states"] == baseline_states


def test_torch_autoload_off_without_a_fallback_leaves_torch_working_and_doctor_explains(python) -> None:
    proc = python(
        "import torch\ntorch.ones(2).sum()\nfrom torchfix_core._doctor import main\nmain(['--json'])\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    report = json.loads(proc.stdout)
    assert report["activation"]["source"] == "off"
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in report["activation"]["detail"]
    assert all(row["state"] in ("pending", "not-installed") for row in report["fixes"]), report["fixes"]


def test_torchfix_run_chains_to_a_shadowed_user_sitecustomize(python, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    proc = python(
        "",
        args=_launcher(
            "-c",
            "import os, torch\nimport torchfix_core; from torchfix_core import _registry\n"
            "print(os.environ.get('USER_SITECUSTOMIZE_RAN'), torchfix_core.activation().source)\n",
        ),
        # the user's directory first; an existing PYTHONPATH (e.g. where torchfix is installed with
        # pip --target, as on machines without an index) stays behind it
        env={
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
        },
    )
    assert proc.stdout.strip().splitlines()[-1] == "1 torchfix-run"


SNAPSHOT = """
import types, warnings

def snapshot():
    # every function, class, descriptor and code object reachable from a torch module's namespace
    # or from the namespace of a class defined there: what a patch can replace
    kept = (staticmethod, classmethod, property, types.CodeType)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for mname, mod in list(sys.modules.items()):
            if not (mname == 'torch' or mname.startswith('torch.')) or not isinstance(mod, types.ModuleType):
                continue
            for name, value in list(vars(mod).items()):
                if callable(value) or isinstance(value, kept):
                    out[(id(mod), name)] = (mname + '.' + name, value)
                if isinstance(value, types.FunctionType):
                    out[(id(value), '__code__')] = (mname + '.' + name + '.__code__', value.__code__)
                if isinstance(value, type) and value.__module__ == mname:
                    for attr, member in list(vars(value).items()):
                        label = mname + '.' + value.__qualname__ + '.' + attr
                        if callable(member) or isinstance(member, kept):
                            out[(id(value), attr)] = (label, member)
                        func = getattr(member, '__func__', member)
                        if isinstance(func, types.FunctionType):
                            out[(id(func), '__code__')] = (label + '.__code__', func.__code__)
    return out

def changed(before, after):
    return sorted(label for key, (label, value) in before.items() if key in after and after[key][1] is not value)
"""

CHURN = {
    "one-apply-revert": "torchfix_core.apply()\npatched = changed(before, snapshot())\ntorchfix_core.revert()\n",
    "50-cycles": (
        "torchfix_core.apply()\npatched = changed(before, snapshot())\n"
        "for _ in range(50):\n    torchfix_core.revert(); torchfix_core.apply()\ntorchfix_core.revert()\n"
    ),
    "8-threads": (
        "import threading\ntorchfix_core.apply()\npatched = changed(before, snapshot())\n"
        "def worker():\n    for _ in range(10):\n        torchfix_core.apply(); torchfix_core.revert()\n"
        "threads = [threading.Thread(target=worker) for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\ntorchfix_core.revert()\n"
    ),
}


@pytest.mark.parametrize("churn", sorted(CHURN))
def test_after_revert_every_attribute_of_torch_is_the_original_object(python, churn: str) -> None:
    # torchfix off at import, every target module imported, torch snapshotted before any patch
    proc = python(
        PRELUDE + SNAPSHOT + "import torch, torchfix_core\nimport_all_triggers()\nbefore = snapshot()\n"
        "noise = changed(before, snapshot())\n" + CHURN[churn] + "emit(noise=noise, patched=patched, "
        "not_restored=changed(before, snapshot()), states=states())\n",
        env={"TORCHFIX_AUTOLOAD": "0"},
    )
    result = last_json(proc)
    assert isinstance(result, dict)
    assert result["noise"] == []
    assert result["patched"], "no fix patched anything: nothing was exercised"
    assert result["not_restored"] == [], result["not_restored"]
    assert "failed" not in result["states"].values(), result["states"]
