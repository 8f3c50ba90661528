"""pytest fixtures for torchfix-autotune's tests (real torch, no stubs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# The helpers module must import under any --import-mode (prepend or importlib).
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="session")
def strict() -> bool:
    """True where SAC replays strictly (the live probe)."""
    from _autotune_helpers import sac_replay_is_strict

    return sac_replay_is_strict()
