"""Session fixtures: the scenario results with the fix and without it (one subprocess each)."""

from __future__ import annotations

from typing import Any

import pytest
from _fp8_helpers import run_scenarios


@pytest.fixture(scope="session")
def with_fix() -> dict[str, Any]:
    return run_scenarios(fix=True)


@pytest.fixture(scope="session")
def without_fix() -> dict[str, Any]:
    return run_scenarios(fix=False)
