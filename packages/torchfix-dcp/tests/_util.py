"""Helpers of the dcp-fqn-orig-mod tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchfix_core.testing import only_fix, run_json_script

FIX = "dcp-fqn-orig-mod"
MODULE = "torch.distributed.checkpoint.state_dict"
PLANNER = "torch.distributed.checkpoint.default_planner"
SCENARIOS = Path(__file__).with_name("_scenarios.py")


def run(name: str, *args: str, on: bool) -> dict[str, Any]:
    """Scenario ``name`` of ``_scenarios.py`` in a fresh interpreter, only this fix on or off."""
    return run_json_script([SCENARIOS, name, *args], env=only_fix(FIX, on), timeout=600)
