"""Helpers of the inductor-rand4x-dropout tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from torchfix_core.testing import only_fix, run_json_script

SCENARIOS = Path(__file__).resolve().parent / "_scenarios.py"
FIX = "inductor-rand4x-dropout"
CODEGEN = "torch._inductor.codegen.triton"
CACHE = "torch._inductor.codecache"
OPT_IN = "TORCHINDUCTOR_USE_RAND4X"

#: torch's own random codegen in a 1-D CUDA kernel context (``_scenarios.kernel_context``), read with
#: torchfix off (never through the fix's probe)
_OWN_CODEGEN = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
from _scenarios import random_codegen
found = random_codegen(1)
found["triton"] = importlib.util.find_spec("triton") is not None
print(json.dumps(found))
"""


@functools.cache
def torch_codegen() -> dict[str, Any]:
    """What this torch's ``TritonOverrides`` emit for ``rand`` in a 1-D CUDA Triton kernel context with
    torchfix off (``rand``, ``gate``: ``_can_use_4x_random()``, null where it does not exist), and
    whether Triton is installed."""
    return run_json_script(["-c", _OWN_CODEGEN, str(SCENARIOS.parent)], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=300)


def bug_codegen() -> bool:
    """Whether this torch's own codegen draws with ``rand4x`` in a 1-D CUDA kernel (the bug's path) on a
    build with Triton (where Inductor generates CUDA Triton kernels)."""
    found = torch_codegen()
    return "rand4x(" in found["rand"] and found["triton"]


def run(scenario: str, *options: str, fix: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One scenario in a fresh interpreter, this fix alone on (``fix``) or off, every other fix off."""
    return run_json_script([SCENARIOS, scenario, *options], env={**only_fix(FIX, fix), **(env or {})}, timeout=600)


def assert_ok(r: dict[str, Any]) -> None:
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')}\n{r.get('traceback', '')}"
