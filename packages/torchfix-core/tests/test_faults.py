"""Broken plugins never break import torch: each shows as failed with its reason.

The plugins live in fixtures/torchfix-demo-broken, installed for real into a temporary directory
that only these subprocesses see."""

from __future__ import annotations

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
