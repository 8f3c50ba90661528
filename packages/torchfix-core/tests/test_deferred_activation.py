"""Deferred activation: with a complete trigger index, ``import torch`` loads no spec at all, and
the first trigger import (or the first status call) does what an immediate activation would have.

Each case runs in a fresh interpreter started with ``-S`` on a site of its own: symlinks to this
interpreter's site-packages without any torchfix distribution (the test-tree fixes installed in
the test environment have no index, which keeps every other test on the immediate path),
torchfix-core installed from this checkout as a real wheel, and one test fix, ``demo-late``,
written as an installed distribution: its spec waits for ``tfx_late_trigger``, a module of its
own, and its ``torchfix.triggers`` entry point publishes that module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1]

SPEC = """\
from torchfix_core.spec import FixSpec

FIX = FixSpec(
    id="demo-late",
    summary="Test fix: waits for tfx_late_trigger, then marks it.",
    implementation="torchfix_demo_late.patch:LateFix",
    distribution="torchfix-demo-late",
    targets={"torch": ">=2.5,<2.99"},
    triggers=("tfx_late_trigger",),
)
"""
PATCH = """\
from torchfix_core import Fix, ProbeResult


class LateFix(Fix):
    def probe(self) -> ProbeResult:
        return ProbeResult(True, "always needed (test fix)")

    def apply(self) -> None:
        import tfx_late_trigger

        self.patches.replace(tfx_late_trigger, "MARK", "patched")
"""


def _site(root: Path, published_trigger: str | None) -> Path:
    site = root / "site"
    site.mkdir()
    packages = Path(sysconfig.get_paths()["purelib"])
    for entry in packages.iterdir():
        if "torchfix" in entry.name.lower():
            continue
        (site / entry.name).symlink_to(entry)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--target", str(site), str(CORE)],
        check=True,
    )
    (site / "tfx_late_trigger.py").write_text('MARK = "original"\n')
    package = site / "torchfix_demo_late"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "package.py").write_text(SPEC)
    (package / "patch.py").write_text(PATCH)
    info = site / "torchfix_demo_late-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchfix-demo-late\nVersion: 0.0.1\n")
    points = "[torchfix.fixes]\ndemo-late = torchfix_demo_late.package:FIX\n"
    if published_trigger is not None:
        points += f"\n[torchfix.triggers]\ndemo-late = {published_trigger}\n"
    (info / "entry_points.txt").write_text(points)
    return site


@pytest.fixture(scope="module")
def indexed_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _site(tmp_path_factory.mktemp("indexed"), "tfx_late_trigger")


def run(site: Path, code: str, **env: str) -> list[object]:
    """Run ``code`` under ``python -S`` with only ``site`` added; each printed line is JSON."""
    child = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND", "PYTHON"))}
    child.update(PYTHONPATH=str(site), **env)
    done = subprocess.run(
        [sys.executable, "-S", "-c", textwrap.dedent(code)], env=child, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.strip().splitlines()]


PROBE = """
import json, sys, warnings
warnings.simplefilter("always")
import torch
from torchfix_core import _activation
print(json.dumps({
    "specs_loaded": "torchfix_core.spec" in sys.modules,
    "fix_modules": sorted(m for m in sys.modules if m.startswith("torchfix_demo_late")),
    "deferred": _activation.deferral() is not None,
    # the registry and the state enums wait for the wake too (about 0.8 ms of import torch)
    "core_modules": sorted(m for m in sys.modules if m.startswith("torchfix_core")),
}))
import tfx_late_trigger
print(json.dumps([tfx_late_trigger.MARK, {r.id: (r.state, r.reason) for r in __import__("torchfix_core").status()}]))
"""


def test_import_torch_loads_no_spec_and_the_trigger_import_applies_the_fix(indexed_site: Path) -> None:
    before, (mark, rows) = run(indexed_site, PROBE)
    assert before == {
        "specs_loaded": False,
        "fix_modules": [],
        "deferred": True,
        "core_modules": [
            "torchfix_core",
            "torchfix_core._activation",
            "torchfix_core._discovery",
            "torchfix_core._env",
            "torchfix_core._import_hooks",
        ],
    }
    assert mark == "patched"
    assert rows["demo-late"][0] == "applied", rows


def test_status_before_any_trigger_finishes_activation_as_an_immediate_one_would(indexed_site: Path) -> None:
    (rows,) = run(
        indexed_site,
        """
        import json, torch, torchfix_core
        from torchfix_core import _activation
        rows = {r.id: [r.state, r.reason] for r in torchfix_core.status()}
        print(json.dumps([rows, _activation.deferral() is None, torchfix_core.activation().source]))
        """,
    )
    states, disarmed, source = rows
    assert states["demo-late"] == ["pending", "waiting for tfx_late_trigger to be imported"]
    assert disarmed and source == "torch.backends"


def test_any_torchfix_variable_makes_activation_immediate_so_it_is_judged_at_import_torch(indexed_site: Path) -> None:
    code = """
    import json, sys, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
    from torchfix_core import _activation
    print(json.dumps(["torchfix_core.spec" in sys.modules, _activation.deferral() is None, [str(w.message) for w in caught]]))
    """
    ((loaded, immediate, warned),) = run(indexed_site, code, TORCHFIX_DISABLE="no-such-fix")
    assert loaded and immediate
    assert any("TORCHFIX_DISABLE names unknown fix id 'no-such-fix'" in w for w in warned), warned
    ((loaded, immediate, warned),) = run(indexed_site, code, TORCHFIX_AUTOLOAD="1")
    assert not loaded and not immediate and warned == []  # an accepted AUTOLOAD=1 asks for nothing


def test_a_fix_without_an_index_entry_is_loaded_at_import_torch(tmp_path: Path) -> None:
    site = _site(tmp_path, published_trigger=None)
    before, (mark, rows) = run(site, PROBE)
    assert before["specs_loaded"] and not before["deferred"]
    assert before["fix_modules"] == ["torchfix_demo_late", "torchfix_demo_late.package"]
    assert mark == "patched" and rows["demo-late"][0] == "applied"


def test_a_stale_index_is_reported_and_the_fix_still_waits_for_its_spec_trigger(tmp_path: Path) -> None:
    site = _site(tmp_path, published_trigger="json.tool")
    (out,) = run(
        site,
        """
        import json, warnings
        import torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import json.tool
        rows = {r.id: r.state for r in __import__("torchfix_core").status()}
        print(json.dumps([rows, [str(w.message) for w in caught]]))
        """,
    )
    rows, warned = out
    assert rows["demo-late"] == "pending"
    assert any("publishes trigger 'json.tool'" in w and "'tfx_late_trigger'" in w for w in warned), warned
