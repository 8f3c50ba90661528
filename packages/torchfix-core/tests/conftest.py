"""Shared fixtures of torchfix-core's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def broken_plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the *installed* torchfix-demo-broken distribution (real dist-info and
    entry points), to be put on PYTHONPATH of a subprocess only."""
    target = tmp_path_factory.mktemp("broken-plugins")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(FIXTURES / "torchfix-demo-broken"),
        ],
        check=True,
    )
    return target


RunPy = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def run_py() -> RunPy:
    """Run Python code in a fresh interpreter with a clean TORCHFIX_* environment."""

    def run(
        code: str, env: dict[str, str] | None = None, path: Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        child = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
        if path is not None:
            child["PYTHONPATH"] = os.pathsep.join([str(path), child.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        child.update(env or {})
        proc = subprocess.run([sys.executable, "-c", code], env=child, capture_output=True, text=True, timeout=600)
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    return run


@pytest.fixture
def doctor_json(run_py: RunPy) -> Callable[..., dict]:
    """``torchfix-doctor --json`` in a fresh interpreter, parsed."""

    def doctor(**kwargs: object) -> dict:
        proc = run_py("from torchfix_core._doctor import main; main(['--json'])", **kwargs)
        return json.loads(proc.stdout)

    return doctor
