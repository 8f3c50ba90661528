"""Fixtures of the cross-package tests: each case runs in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Callable

import pytest


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
    env.update(extra)
    return env


@pytest.fixture
def python() -> Callable[..., subprocess.CompletedProcess]:
    """Run code in a fresh interpreter; fail with its output unless it exits 0."""

    def run(
        code: str, *, env: dict[str, str] | None = None, args: list[str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        cmd = [sys.executable, *(args or ["-c", code])]
        proc = subprocess.run(cmd, env=clean_env(**(env or {})), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    return run
