"""Every non-empty subset of the five fixes, each installed as real distributions (``nox -s combinations``).

The environment holds torch, torchfix-core and TransformerEngine's Python sources with the test
stand-ins (as the ``te`` sessions do), and *no* fix package: each subset's wheels (built once from
``packages/``) are installed with pip into their own ``--target`` directory, which the subprocesses
below get on ``PYTHONPATH``, so discovery finds exactly that subset through its entry points.
Per subset:

* discovery: doctor lists exactly the subset's fixes as installed (the family's others as
  ``not-installed``), none ``failed``, in the order the full set
  gives them, each in the state it has in the full set (what else is installed changes nothing);
* each installed fix's own reproduction, unchanged from its package's tests (listed in
  ``REPRODUCTIONS``): red with that fix disabled, green with it, while the rest of the subset is
  active.

Marked ``slow``: ``nox -s tests`` deselects it, and it skips where fix packages are installed in
the environment itself (a development venv), because discovery would see them in every subset.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"

# fix id -> (package directory, test nodes that reproduce its bug: red without the fix, green with it)
REPRODUCTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "aot-fallback": (
        "torchfix-aot-fallback",
        (
            "test_compile_fallback.py::test_graph_break_aot_compile_fails_without_fix",
            "test_compile_fallback.py::test_graph_break_aot_compile_passes_with_fix",
        ),
    ),
    "autotune": (
        "torchfix-autotune",
        (
            "test_cpu_emulation.py::test_cpu_emulated_cold_autotune_in_recompute_fails_without_mode_filter",
            "test_cpu_emulation.py::test_cpu_emulated_cold_autotune_in_recompute_passes_with_mode_filter",
        ),
    ),
    "fp8-recompute": (
        "torchfix-fp8-recompute",
        (
            "test_te_recompute.py::test_inner_autocast_recompute_fails_without_fix[nonreentrant]",
            "test_te_recompute.py::test_inner_autocast_recompute_passes_with_fix[nonreentrant]",
        ),
    ),
    "placement-cache": (
        "torchfix-placement-cache",
        (
            "test_shared_cache_multirank.py::test_uneven_sharding_false_hit_fails_without_fix",
            "test_shared_cache_multirank.py::test_uneven_sharding_passes_with_fix",
        ),
    ),
    "sac-replay": (
        "torchfix-sac-replay",
        (
            "test_guard_miss_repro.py::test_recompute_guard_miss_fails_without_fix[checkpoint]",
            "test_guard_miss_repro.py::test_recompute_guard_miss_passes_with_fix[checkpoint]",
        ),
    ),
}
FIXES = sorted(REPRODUCTIONS)
SUBSETS = [c for n in range(1, len(FIXES) + 1) for c in itertools.combinations(FIXES, n)]
INSTALLED_HERE = [
    fix for fix, (package, _) in REPRODUCTIONS.items() if importlib.util.find_spec(package.replace("-", "_"))
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(INSTALLED_HERE),
        reason=f"fix packages installed in this environment ({INSTALLED_HERE}): run `nox -s combinations`",
    ),
]


def child_env(target: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), env.get("PYTHONPATH")]))
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str], timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One wheel per fix package, built from this checkout."""
    out = tmp_path_factory.mktemp("wheels")
    packages = [str(PACKAGES / REPRODUCTIONS[fix][0]) for fix in FIXES]
    done = run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), *packages],
        os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    built = {}
    for fix in FIXES:
        prefix = REPRODUCTIONS[fix][0].replace("-", "_") + "-"
        (built[fix],) = [p for p in out.glob("*.whl") if p.name.startswith(prefix)]
    return built


def install(subset: tuple[str, ...], wheels: dict[str, Path], root: Path) -> Path:
    target = root / ("+".join(subset))
    if not target.exists():
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
        done = run([*cmd, *(str(wheels[f]) for f in subset)], os.environ.copy())
        assert done.returncode == 0, done.stderr
    return target


def doctor(target: Path) -> list[dict[str, object]]:
    done = run([sys.executable, "-m", "torchfix_core", "--json"], child_env(target))
    assert done.returncode == 0, done.stderr
    rows = [row for row in json.loads(done.stdout)["fixes"] if row["id"] in REPRODUCTIONS]
    # doctor also lists the family's fixes that are not installed, as such
    absent = [row for row in rows if row["state"] == "not-installed"]
    assert all(row["version"] is None for row in absent), absent
    return [row for row in rows if row["state"] != "not-installed"]


@pytest.fixture(scope="session")
def installs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("subsets")


@pytest.fixture(scope="session")
def full_set(wheels: dict[str, Path], installs: Path) -> list[dict[str, object]]:
    """Doctor rows with all five installed: the reference order and states."""
    rows = doctor(install(tuple(FIXES), wheels, installs))
    assert sorted(r["id"] for r in rows) == FIXES, rows
    return rows


@pytest.mark.parametrize("subset", SUBSETS, ids=["+".join(s) for s in SUBSETS])
def test_subset_discovery_order_and_reproductions(
    subset: tuple[str, ...], wheels: dict[str, Path], installs: Path, full_set: list[dict[str, object]]
) -> None:
    target = install(subset, wheels, installs)
    rows = doctor(target)
    assert [r["id"] for r in rows] == [r["id"] for r in full_set if r["id"] in subset], rows
    reference = {r["id"]: r["state"] for r in full_set}
    for row in rows:
        assert row["state"] != "failed", row
        assert row["state"] == reference[row["id"]], (row, reference)
    for fix in subset:
        package, nodes = REPRODUCTIONS[fix]
        tests = PACKAGES / package / "tests"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests)]
        done = run([*cmd, *(f"{tests}/{node}" for node in nodes)], child_env(target))
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        assert done.returncode == 0 and f"{len(nodes)} passed" in summary, (
            f"{fix} reproduction with {subset} installed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
        )
