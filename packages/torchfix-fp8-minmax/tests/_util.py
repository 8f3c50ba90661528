"""Helpers of the fp8-minmax-store tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from torchfix_core.testing import only_fix, run_json_script

SCENARIOS = Path(__file__).resolve().parent / "_scenarios.py"
FIX = "fp8-minmax-store"
CODEGEN = "torch._inductor.codegen.triton"
CACHE = "torch._inductor.codecache"

#: torch's own min/max codegen, read with torchfix off (never through the fix's probe)
_OWN_CODEGEN = f"""
import importlib.util, json, torch
from {CODEGEN} import TritonKernelOverrides as o
triton = importlib.util.find_spec("triton") is not None
print(json.dumps({{"minimum": o.minimum("a", "b"), "hip": bool(torch.version.hip), "triton": triton}}))
"""


@functools.cache
def torch_codegen() -> dict[str, Any]:
    """What this torch emits for ``minimum("a", "b")`` with torchfix off, whether it is ROCm, and
    whether Triton is installed."""
    return run_json_script(["-c", _OWN_CODEGEN], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=300)


def bug_codegen() -> bool:
    """Whether this torch emits the ``PropagateNan`` min/max on a CUDA (non-ROCm) build with Triton."""
    found = torch_codegen()
    return "PropagateNan" in found["minimum"] and not found["hip"] and found["triton"]


def run(scenario: str, *options: str, fix: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One scenario in a fresh interpreter, this fix alone on (``fix``) or off, every other fix off."""
    return run_json_script([SCENARIOS, scenario, *options], env={**only_fix(FIX, fix), **(env or {})}, timeout=600)


def assert_ok(r: dict[str, Any]) -> None:
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')}\n{r.get('traceback', '')}"
