"""Helpers shared by this package's tests: run a reproduction scenario in a fresh interpreter (the
scenarios ship in the wheel, behind the declared reproductions: ``torchfix_sac_replay.reproduction_*``)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from torchfix_core.testing import only_fix, run_json_script

#: sac-replay's scenarios (``python -m`` it)
SCENARIOS = "torchfix_sac_replay.reproduction_sac_replay"
#: sac-storage-key's scenarios (``python -m`` it)
STORAGE_KEY_SCENARIOS = "torchfix_sac_replay.reproduction_sac_storage_key"
STORAGE_KEY = "sac-storage-key"
VENVS = Path(os.environ.get("SAC_REPLAY_TEST_VENVS", Path(__file__).resolve().parents[3] / ".venvs"))


def scenario(
    name: str,
    *args: str,
    fix: bool,
    python: str = sys.executable,
    timeout: float = 900,
) -> dict[str, Any]:
    """Run sac-replay's scenario ``NAME ARGS`` with only this fix enabled (``fix=True``) or disabled.

    Every other torchfix fix is disabled so that a sibling package cannot change the result.
    """
    env = only_fix("sac-replay", fix)
    if "--device" not in args or args[list(args).index("--device") + 1] == "cpu":
        # A CPU scenario on a GPU machine: torch.compile's first call inside the checkpointed forward
        # would initialise CUDA there, which checkpoint refuses ("device state was initialized in
        # the forward pass"); seen on the H200 machine with torch 2.11. Hide the GPUs.
        env["CUDA_VISIBLE_DEVICES"] = ""
    return run_json_script(["-m", SCENARIOS, name, *args], env=env, python=python, timeout=timeout)


def run_storage_key(name: str, *, fix: bool, timeout: float = 900) -> dict[str, Any]:
    """Run sac-storage-key's scenario ``name`` in a fresh interpreter, with only sac-storage-key
    enabled (``fix=True``) or every fix disabled; returns its JSON line."""
    # CPU scenarios: a first torch.compile inside the checkpointed forward must not initialise CUDA
    env = {**only_fix(STORAGE_KEY, fix), "CUDA_VISIBLE_DEVICES": ""}
    return run_json_script(["-m", STORAGE_KEY_SCENARIOS, name], env=env, timeout=timeout)


@functools.cache
def storage_key_bug_present() -> bool:
    """Whether SAC on the running torch replays one compiled region's saved output for another
    (sac-storage-key's ``replay`` without the fix, in a fresh interpreter): the tests' own live check,
    independent of the fix's probe."""
    return bool(run_storage_key("replay", fix=False)["mixes_regions"])


def venv_python(version: str) -> str:
    """Python of ``<venvs>/torch-VERSION`` (skips the test when that venv is absent)."""
    python = VENVS / f"torch-{version}" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no torch {version} venv at {python.parent.parent}")
    probe = subprocess.run(
        [str(python), "-c", "import torchfix_sac_replay, torchfix_core"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"torchfix-sac-replay is not installed in {python.parent.parent}")
    return str(python)


@pytest.fixture(scope="session")
def bug_present() -> bool:
    """Whether the running torch has per-context compiler config (the probe, on live objects)."""
    from torchfix_sac_replay import probes

    return probes.dynamo_config_is_context_local()


@pytest.fixture
def fix_on(bug_present: bool) -> Iterator[None]:
    """sac-replay applied in this process (through the API); skips where torch's compiler config is
    process-global (nothing to carry: the fix is not applied there)."""
    if not bug_present:
        pytest.skip("config is process-global on this torch: the fix is not applied")
    import torchfix_core

    torchfix_core.apply(only=["sac-replay"])
    assert next(r.state for r in torchfix_core.status() if r.id == "sac-replay") == "applied"
    yield


@pytest.fixture(scope="session")
def expected_state(bug_present: bool) -> str:
    """The fix's state on this torch: out-of-range outside its validated range (2.10), else the
    probe's decision."""
    from torchfix_core.testing import state_to_expect

    return state_to_expect("sac-replay", bug_present)
