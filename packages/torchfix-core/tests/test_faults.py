"""Broken plugins never break import torch: each shows as failed with its reason.

The plugins live in fixtures/torchfix-demo-broken, installed for real into a temporary directory
that only these subprocesses see."""

from __future__ import annotations

import json
import sys

import pytest

EXPECTED_REASONS = {
    "broken-import": "cannot be loaded: ModuleNotFoundError",
    "broken-not-a-spec": "not a torchfix_core.FixSpec",
    "broken-id": "differs from its entry-point name",
    "broken-probe": "probe raised ValueError: probe exploded",
    "broken-apply": "apply raised OSError: apply exploded after patching",
    "broken-refused": "refused: ",
    "broken-cycle-a": "cycle",
    "broken-cycle-b": "cycle",
    "broken-after-unknown": "unknown fix id(s) ['no-such-fix']",
    "broken-impl-import": "loading the implementation raised AttributeError",
    "broken-missing-target": "refused: torch.utils.checkpoint.no_such_function does not exist",
    "broken-signature": "refused: torch.utils.checkpoint.checkpoint_sequential has parameters "
    "('functions', 'segments', 'input', 'use_reentrant', 'kwargs'), expected ('functions', 'segments')",
    "broken-probe-in-hook": "probe raised ValueError: probe exploded",
    "broken-hook-base-exception": "post-import hook raised Aborted: apply aborted after patching",
}


def test_import_torch_survives_every_broken_plugin_and_doctor_names_each_failure(
    run_py, broken_plugins, doctor_json
) -> None:
    report = doctor_json(path=broken_plugins)
    rows = {f["id"]: f for f in report["fixes"]}
    for fix_id, fragment in EXPECTED_REASONS.items():
        assert rows[fix_id]["state"] == "failed", (fix_id, rows[fix_id])
        assert fragment in rows[fix_id]["reason"], (fix_id, rows[fix_id]["reason"])
    # the good fixes are unaffected
    assert rows["demo-checkpoint"]["state"] == "applied"
    assert rows["demo-dynamo"]["state"] == "applied"
    assert rows["reentrant-import"]["state"] == "applied", rows["reentrant-import"]


def test_failed_apply_in_a_post_import_hook_is_rolled_back(run_py, broken_plugins) -> None:
    proc = run_py(
        "import torch\n"
        "import torch.utils.bundled_inputs as b\n"
        "from torchfix_core.patching import is_torchfix_wrapper\n"
        "import torchfix_core\n"
        "row = next(r for r in torchfix_core.status() if r.id == 'broken-apply')\n"
        "print(row.state, is_torchfix_wrapper(b.augment_model_with_bundled_inputs))\n",
        path=broken_plugins,
    )
    assert proc.stdout.strip().splitlines()[-1] == "failed False"


def test_refused_patch_leaves_the_first_patch_point_untouched(run_py, broken_plugins) -> None:
    proc = run_py(
        "import torch, torch.utils.checkpoint as c\n"
        "import torchfix_core\n"
        "print(c.detach_variable.__module__, getattr(c.detach_variable, '__torchfix_fix__', None))\n",
        path=broken_plugins,
        env={"TORCHFIX_DISABLE": "demo-checkpoint"},
    )
    assert proc.stdout.strip().splitlines()[-1] == "torch.utils.checkpoint None"


def test_strict_mode_makes_a_broken_plugin_fail_import_torch_loudly(run_py, broken_plugins) -> None:
    proc = run_py("import torch", path=broken_plugins, env={"TORCHFIX_STRICT": "1"}, check=False)
    assert proc.returncode != 0
    assert "TorchfixError" in proc.stderr and "Failed to load the backend extension: torchfix_core" in proc.stderr


@pytest.mark.parametrize(
    ("fix_id", "code"),
    [
        ("broken-missing-target", "print(hasattr(c, 'no_such_function'))"),
        (
            "broken-signature",
            "print(c.checkpoint_sequential.__module__ == 'torch.utils.checkpoint' and "
            "getattr(c.checkpoint_sequential, '__torchfix_fix__', None) is None)",
        ),
    ],
)
def test_missing_or_reshaped_target_is_refused_with_its_reason_and_left_untouched(
    run_py, broken_plugins, fix_id: str, code: str
) -> None:
    proc = run_py(
        "import torch, torch.utils.checkpoint as c\n"
        "import torchfix_core\n"
        f"row = next(r for r in torchfix_core.status() if r.id == {fix_id!r})\n"
        "print(row.state, row.reason)\n" + code + "\n",
        path=broken_plugins,
    )
    *_, row, untouched = proc.stdout.strip().splitlines()
    assert row == f"failed {EXPECTED_REASONS[fix_id]}"
    assert untouched == ("False" if fix_id == "broken-missing-target" else "True")


def test_probe_raising_or_apply_aborting_in_a_late_post_import_hook_fails_the_fix_not_the_import(
    run_py, broken_plugins
) -> None:
    proc = run_py(
        "import json, torch, torchfix_core\n"
        "from torchfix_core.patching import is_torchfix_wrapper\n"
        "ids = ('broken-probe-in-hook', 'broken-hook-base-exception')\n"
        "before = {r.id: r.state for r in torchfix_core.status() if r.id in ids}\n"
        "import torch.utils.show_pickle as s\n"
        "after = {r.id: [r.state, r.reason] for r in torchfix_core.status() if r.id in ids}\n"
        "print(json.dumps([before, after, is_torchfix_wrapper(s.main), s.main.__module__]))\n",
        path=broken_plugins,
    )
    before, after, wrapped, module = json.loads(proc.stdout.strip().splitlines()[-1])
    assert before == {"broken-probe-in-hook": "pending", "broken-hook-base-exception": "pending"}
    for fix_id, (state, reason) in after.items():
        assert state == "failed" and reason == EXPECTED_REASONS[fix_id], (fix_id, state, reason)
    assert not wrapped and module == "torch.utils.show_pickle"  # the partial patch was rolled back


REENTRANT_PATHS = {
    # how activation starts: (code before `import torch`, extra environment, expected source)
    "torch.backends": ("", {}, "torch.backends"),
    "api-before-torch": ("torchfix_core.activate()\n", {}, "api"),
    "auto-torch-autoload-off": (
        "import torchfix_core.auto\n",
        {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        "torchfix_core.auto",
    ),
}


@pytest.mark.parametrize("path", sorted(REENTRANT_PATHS))
def test_reentrant_import_of_torch_from_inside_activation_neither_recurses_nor_hangs(
    run_py, broken_plugins, path: str
) -> None:
    # torchfix_demo_broken.reentrant imports torch and calls activate() while discovery loads it;
    # reentrant-import's probe and apply import torch (and another fix's trigger) and activate again
    before, env, source = REENTRANT_PATHS[path]
    proc = run_py(
        "import json, sys, torchfix_core\n"
        "import torchfix_core; from torchfix_core import _activation\n"
        "from torchfix_core.patching import is_torchfix_wrapper\n"
        "calls = []\n"
        "original = _activation.activate_safely\n"
        "def counting(source):\n"
        "    calls.append(str(source))\n"
        "    original(source)\n"
        "_activation.activate_safely = counting\n" + before + "import torch\n"
        "import torch.utils.file_baton\n"
        "import torch.utils.throughput_benchmark as tb\n"
        "original_format_time = tb.format_time.__wrapped__\n"
        "rows = {r.id: [r.state, r.reason] for r in torchfix_core.status()}\n"
        "wrapped = is_torchfix_wrapper(tb.format_time)\n"
        "torchfix_core.revert(only=['reentrant-import'])\n"
        "print(json.dumps([torchfix_core.activation().source, calls, rows, wrapped, tb.format_time is original_format_time]))\n",
        path=broken_plugins,
        env=env,
    )
    activated_by, calls, rows, wrapped, restored = json.loads(proc.stdout.strip().splitlines()[-1])
    assert activated_by == source
    # the outer activation, then the re-entrant ones: spec module, probe, apply ("api"); before torch
    # is imported, the spec module's `import torch` also runs torch's own entry point inside activation
    nested = ["torch.backends"] if path == "api-before-torch" else []
    assert calls == [source, *nested, "api", "api", "api"], calls
    assert rows["reentrant-import"][0] == "applied", rows["reentrant-import"]
    assert wrapped and restored
    for fix_id in ("broken-probe-in-hook", "broken-hook-base-exception"):  # hooks fired inside its probe
        assert rows[fix_id] == ["failed", EXPECTED_REASONS[fix_id]], rows[fix_id]
    assert rows["demo-checkpoint"][0] == "applied"


@pytest.mark.parametrize("path", ["auto", "torchfix-run"])
def test_torch_autoload_off_fallback_activation_shows_every_broken_plugin_failed(
    run_py, broken_plugins, path: str
) -> None:
    doctor = [sys.executable, "-m", "torchfix_core", "--json"]
    if path == "auto":
        command = [
            sys.executable,
            "-c",
            "import torchfix_core.auto\nfrom torchfix_core._doctor import main; main(['--json'])",
        ]
    else:
        command = [sys.executable, "-m", "torchfix_core._launcher", "--", *doctor]
    proc = run_py(
        f"import subprocess, sys\nsys.exit(subprocess.run({command!r}).returncode)\n",
        path=broken_plugins,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    report = json.loads(proc.stdout)
    assert report["activation"]["source"] == ("torchfix_core.auto" if path == "auto" else "torchfix-run")
    rows = {f["id"]: f for f in report["fixes"]}
    for fix_id, fragment in EXPECTED_REASONS.items():
        assert rows[fix_id]["state"] == "failed" and fragment in rows[fix_id]["reason"], (fix_id, rows[fix_id])
    assert rows["demo-checkpoint"]["state"] == "applied" and rows["reentrant-import"]["state"] == "applied"
