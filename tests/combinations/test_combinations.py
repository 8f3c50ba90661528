"""Subsets of the family's fixes, each installed as real distributions (``nox -s combinations-<torch>``).

Which subsets: ``selection.py`` (its docstring says why): every fix alone, all of them, every pair,
and every subset of each group of fixes that share a distribution, a trigger module, an ``after``
edge or a patch point; groups are found from the fixes' specs and, for patch points, from a probe on
this torch (``_patch_points.py``: each fix applied alone, its live patches read, reverted). With
``COMBINATIONS_SELECTION=powerset`` (``nox -s combinations_powerset-<torch>``): all 2^n - 1.
The selection, its groups and the patch points are written to ``$COMBINATIONS_REPORT`` when set.

The environment holds torch, torchfix-core and TransformerEngine's Python sources with the test
stand-ins (as the ``te`` sessions do), and *no* fix package. The fix distributions are built into
wheels once, at collection (this checkout's ``packages/``); each set of distributions a subset needs
is installed with pip into its own ``--target`` directory, which the subprocesses below get on
``PYTHONPATH``, so discovery finds exactly those distributions through their entry points. A subset
is of fix ids: the fixes of an installed distribution that are not in the subset are switched off
with ``TORCHFIX_<ID>_ENABLED=0``, set by a ``sitecustomize.py`` in a directory of the subset's own
that is also on ``PYTHONPATH``, so that it reaches every interpreter of the run, also those that a
package's test harness starts with its own clean ``TORCHFIX_*`` environment.

Per subset:

* discovery: doctor lists exactly the installed distributions' fixes, none ``failed``, in the order
  the full set gives them; the subset's fixes each in the state it has in the full set (what else is
  installed changes nothing), the switched-off ones ``disabled`` by that variable;
* each of the subset's fixes' own reproduction, unchanged from its package's tests (listed in
  ``REPRODUCTIONS``), while the rest of the subset is active: red with that fix disabled, green
  with it. Where the fix is applied in the full set both nodes must pass; where it is not (bug absent
  on this torch, out of range, library missing) they must pass or skip by their own conditions.
  Fixes whose reproduction cannot run in this environment are listed in ``NO_REPRODUCTION_HERE``
  (checked for discovery only); every fix of the family is in exactly one of the two tables.

Cost (2 shared cores, torch 2.13, ``TORCHINDUCTOR_COMPILE_THREADS=1``): docs/design.md,
"Combination suite". Marked ``slow`` (``nox -s tests`` deselects it); it skips where fix packages
are installed in the environment itself (a development venv), because discovery would see them in
every subset.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import selection  # noqa: E402 - this directory's selection.py

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
HERE = Path(__file__).resolve().parent

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
    "backward-context": (
        "torchfix-sac-replay",
        (
            "test_backward_context_repro.py::test_concurrent_compiled_backwards_fails_without_fix",
            "test_backward_context_repro.py::test_concurrent_compiled_backwards_pass_with_fix",
        ),
    ),
    "sac-storage-key": (
        "torchfix-sac-replay",
        (
            "test_sac_storage_key_repro.py::test_cached_value_fifo_mismatch_fails_without_fix",
            "test_sac_storage_key_repro.py::test_cached_value_fifo_mismatch_passes_with_fix",
        ),
    ),
    "aot-bypass-key": (
        "torchfix-placement-cache",
        (
            "test_aot_bypass_key_repro.py::test_graphs_of_one_capture_share_an_artifact_fails_without_fix",
            "test_aot_bypass_key_repro.py::test_graphs_of_one_capture_passes_with_fix",
        ),
    ),
    "aot-autocast-key": (
        "torchfix-placement-cache",
        (
            "test_aot_autocast_key_repro.py::test_autocast_dtype_change_in_one_process_fails_without_fix",
            "test_aot_autocast_key_repro.py::test_autocast_dtype_change_in_one_process_passes_with_fix",
        ),
    ),
    "aot-hop-body-key": (
        "torchfix-placement-cache",
        (
            "test_aot_hop_body_key_repro.py::test_changed_global_in_checkpoint_body_fails_without_fix",
            "test_aot_hop_body_key_repro.py::test_changed_global_in_checkpoint_body_passes_with_fix",
        ),
    ),
    "recompute-cache": (
        "torchfix-recompute-cache",
        (
            "test_recompute_cache.py::test_two_checkpointed_blocks_fails_without_fix",
            "test_recompute_cache.py::test_two_checkpointed_blocks_pass_with_fix",
        ),
    ),
    "budget-rng": (
        "torchfix-recompute-cache",
        (
            "test_budget_rng.py::test_budget_dropout_grad_fails_without_fix",
            "test_budget_rng.py::test_budget_dropout_grad_passes_with_fix",
        ),
    ),
    "fsdp-offload-hook": (
        "torchfix-fsdp-offload",
        (
            "test_fsdp_offload_hook.py::test_hooks_run_during_a_non_blocking_copy_fails_without_fix",
            "test_fsdp_offload_hook.py::test_wrapper_unpins_hooked_params_for_the_call_with_fix",
        ),
    ),
    "fsdp-recompute-cast": (
        "torchfix-fsdp-recompute",
        (
            "test_fsdp_recompute_cast.py::test_hf_checkpoint_bf16_fails_without_fix",
            "test_fsdp_recompute_cast.py::test_hf_checkpoint_bf16_passes_with_fix",
        ),
    ),
    "fsdp-recompute-unshard": (
        "torchfix-fsdp-recompute",
        (
            "test_fsdp_recompute_unshard.py::test_nested_two_forwards_fails_without_fix",
            "test_fsdp_recompute_unshard.py::test_nested_two_forwards_passes_with_fix",
        ),
    ),
    "fp8-recompute-pairing": (
        "torchfix-fp8-recompute",
        (
            "test_pairing_recompute.py::test_eval_module_recompute_fails_without_fix[eval-nonreentrant-recompute-train]",
            "test_pairing_recompute.py::test_eval_module_balances_recompute_state_with_fix[eval-nonreentrant-recompute-train]",
        ),
    ),
}
# fix id -> why its reproduction does not run in this suite's environment (discovery is still checked)
NO_REPRODUCTION_HERE: dict[str, str] = {
    "magi-aot-fallback": "needs MagiCompiler's source (nox -s magi / magi_torch)",
    "magi-cache-key": "needs MagiCompiler's source (nox -s magi / magi_torch)",
}

MODE = os.environ.get("COMBINATIONS_SELECTION", "selection")
FAMILY = selection.load_facts()
INSTALLED_HERE = sorted({f.distribution for f in FAMILY if importlib.util.find_spec(f.distribution.replace("-", "_"))})
skip_installed_here = pytest.mark.skipif(
    bool(INSTALLED_HERE),
    reason=f"fix packages installed in this environment ({INSTALLED_HERE}): run `nox -s combinations-<torch>`",
)


def child_env(*paths: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, paths), env.get("PYTHONPATH")]))
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str], timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


# ---------------------------------------------------------------- built once, at collection


@functools.cache
def workdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="torchfix-combinations-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@functools.cache
def wheels() -> dict[str, Path]:
    """Distribution -> its wheel, built from this checkout."""
    out = workdir() / "wheels"
    dists = sorted({f.distribution for f in FAMILY})
    done = run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
        + [str(PACKAGES / d) for d in dists],
        os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    built = {}
    for dist in dists:
        (built[dist],) = [p for p in out.glob("*.whl") if p.name.startswith(dist.replace("-", "_") + "-")]
    return built


def install(dists: tuple[str, ...]) -> Path:
    """A ``--target`` directory holding exactly ``dists`` (made once per set of distributions)."""
    target = workdir() / "installs" / "+".join(dists)
    if not target.exists():
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
        done = run([*cmd, *(str(wheels()[d]) for d in dists)], os.environ.copy())
        assert done.returncode == 0, done.stderr
    return target


def switches(subset: selection.Subset, off: tuple[str, ...]) -> Path:
    """A directory whose ``sitecustomize.py`` switches ``off`` off in every interpreter that has it on
    ``PYTHONPATH`` (an empty directory when nothing is switched off)."""
    path = workdir() / "switches" / "+".join(subset)
    path.mkdir(parents=True, exist_ok=True)
    if off:
        switched = "".join(f"os.environ[{selection.enabled_variable(i)!r}] = '0'\n" for i in off)
        (path / "sitecustomize.py").write_text(SITECUSTOMIZE.format(switched=switched))
    return path


# what switches() writes: the switches, then the sitecustomize this one shadows, if any (as
# torchfix-run's own does)
SITECUSTOMIZE = """import importlib.util
import os
import sys

{switched}
_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    _dir = os.path.abspath(_entry or os.getcwd())
    _candidate = os.path.join(_dir, "sitecustomize.py")
    if _dir != _here and os.path.isfile(_candidate):
        _spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", _candidate)
        if _spec is not None and _spec.loader is not None:
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
"""


@functools.cache
def patch_points() -> dict[str, dict[str, Any]]:
    """``_patch_points.py`` run with every distribution installed, on this torch."""
    target = install(tuple(sorted(wheels())))
    env = child_env(target, TORCHFIX_AUTOLOAD="0")
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(HERE)])
    done = run([sys.executable, str(HERE / "_patch_points.py")], env)
    assert done.returncode == 0, f"patch-point probe:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@functools.cache
def plan() -> tuple[list[selection.FixFacts], dict[selection.Subset, list[str]]]:
    """The fixes (with this torch's patch points) and the subsets to run, reported to
    ``$COMBINATIONS_REPORT`` when set."""
    if INSTALLED_HERE:  # the tests skip: list the selection without probing
        return FAMILY, selection.select(FAMILY)
    probed = patch_points()
    fixes = selection.load_facts({i: row["points"] for i, row in probed.items()})
    chosen = selection.powerset(fixes) if MODE == "powerset" else selection.select(fixes)
    report = os.environ.get("COMBINATIONS_REPORT")
    if report:
        import torch

        data = {
            "torch": str(torch.__version__),
            "mode": MODE,
            "fixes": len(fixes),
            "powerset_size": 2 ** len(fixes) - 1,
            "patch_points": probed,
            "groups": [vars(g) for g in selection.groups(fixes)],
            "subsets": [{"fixes": list(s), "why": why} for s, why in chosen.items()],
        }
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(json.dumps(data, indent=1, default=list))
    return fixes, chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "subset" in metafunc.fixturenames:
        _, chosen = plan()
        metafunc.parametrize("subset", list(chosen), ids=["+".join(s) for s in chosen])


# ---------------------------------------------------------------- checks


def doctor(env: dict[str, str]) -> list[dict[str, Any]]:
    """Doctor's rows of the family's fixes whose distribution is installed (application order)."""
    done = run([sys.executable, "-m", "torchfix_core", "--json"], env)
    assert done.returncode == 0, done.stderr
    ids = {f.id for f in FAMILY}
    rows = [row for row in json.loads(done.stdout)["fixes"] if row["id"] in ids]
    # doctor may also list the family's fixes whose distribution is absent, as such
    absent = [row for row in rows if row["version"] is None]
    assert all(row["state"] == "not-installed" for row in absent), absent
    return [row for row in rows if row["version"] is not None]


@pytest.fixture(scope="session")
def full_set() -> list[dict[str, Any]]:
    """Doctor rows with every distribution installed and every fix on: the reference order and states."""
    rows = doctor(child_env(install(tuple(sorted(wheels())))))
    assert sorted(r["id"] for r in rows) == sorted(f.id for f in FAMILY), rows
    return rows


def test_every_fix_has_a_reproduction_row_or_a_reason() -> None:
    """A new fix cannot be left out of the suite silently: each family fix id is in exactly one table."""
    ids = {f.id for f in FAMILY}
    both = set(REPRODUCTIONS) & set(NO_REPRODUCTION_HERE)
    assert not both, f"in both REPRODUCTIONS and NO_REPRODUCTION_HERE: {sorted(both)}"
    assert set(REPRODUCTIONS) | set(NO_REPRODUCTION_HERE) == ids, (
        f"missing: {sorted(ids - set(REPRODUCTIONS) - set(NO_REPRODUCTION_HERE))}; "
        f"not in the family: {sorted((set(REPRODUCTIONS) | set(NO_REPRODUCTION_HERE)) - ids)}"
    )
    by_id = {f.id: f for f in FAMILY}
    for fix, (package, nodes) in REPRODUCTIONS.items():
        assert package == by_id[fix].distribution, (fix, package)
        assert nodes and all((PACKAGES / package / "tests" / n.split("::")[0]).is_file() for n in nodes), (fix, nodes)


@pytest.mark.slow
@skip_installed_here
def test_subset_discovery_order_and_reproductions(subset: selection.Subset, full_set: list[dict[str, Any]]) -> None:
    fixes, _ = plan()
    dists, off = selection.realize(subset, fixes)
    env = child_env(switches(subset, off), install(dists))
    rows = doctor(env)
    installed = set(subset) | set(off)
    assert [r["id"] for r in rows] == [r["id"] for r in full_set if r["id"] in installed], rows
    reference = {r["id"]: r["state"] for r in full_set}
    for row in rows:
        assert row["state"] != "failed", row
        if row["id"] in off:
            assert row["state"] == "disabled" and selection.enabled_variable(row["id"]) in row["reason"], row
        else:
            assert row["state"] == reference[row["id"]], (row, reference)
    for fix in subset:
        if fix not in REPRODUCTIONS:
            continue  # NO_REPRODUCTION_HERE
        package, nodes = REPRODUCTIONS[fix]
        tests = PACKAGES / package / "tests"
        cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(tests)]
        done = run([*cmd, *(f"{tests}/{node}" for node in nodes)], env)
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        if reference[fix] == "applied":
            ok = done.returncode == 0 and f"{len(nodes)} passed" in summary and "skipped" not in summary
        else:  # the bug is absent here: the nodes pass or skip by their own conditions
            ok = done.returncode == 0 and "failed" not in summary and "error" not in summary
        assert ok, (
            f"{fix} reproduction with {subset} ({reference[fix]} in the full set):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
        )
