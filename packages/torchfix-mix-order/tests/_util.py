"""Helpers of the mix-order-view-write tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from torchfix_core.testing import only_fix, run_json_script

SCENARIOS = Path(__file__).resolve().parent / "_scenarios.py"
FIX = "mix-order-view-write"
SIMD = "torch._inductor.codegen.simd"
CACHE = "torch._inductor.codecache"

#: this torch's own mix-order codegen, read with torchfix off (never through the fix's probe)
_OWN_CODEGEN = f"""
import importlib.util, json, torch
from {SIMD} import SIMDScheduling as s
f = vars(s).get("_codegen_mix_order_reduction")
print(json.dumps({{
    "mix_order": f is not None,
    "writes_views": f is not None and "NonOwningLayout" in f.__code__.co_names,
    "triton": importlib.util.find_spec("triton") is not None,
    # the layout this fix patches (2.11-2.14: the rebinding line is built in a local final_reduce)
    "known_layout": f is not None and "final_reduce" in f.__code__.co_varnames,
}}))
"""


@functools.cache
def torch_codegen() -> dict[str, Any]:
    """Whether this torch has mix-order reduction, whether its codegen tells NonOwningLayout outputs
    apart (upstream's fix), and whether Triton is installed."""
    return run_json_script(["-c", _OWN_CODEGEN], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=300)


def bug_codegen() -> bool:
    """Whether this torch's mix-order reduction rebinds view outputs (no upstream fix) and Triton is
    installed (so Inductor generates mix-order kernels at all)."""
    found = torch_codegen()
    return bool(found["mix_order"] and not found["writes_views"] and found["triton"])


def refused_layout() -> bool:
    """Whether this torch has the bug in a layout the fix refuses (2.10.0: the rebinding line written
    inline, no ``final_reduce``): out of its range there, and forced, ``failed`` with the reason."""
    return bug_codegen() and not torch_codegen()["known_layout"]


#: the fix forced onto this torch (past its range check), its state and reason, torchfix's own output
_FORCED_STATE = f"""
import json, torch, torchfix_core
torchfix_core.apply(only=["{FIX}"])
import {SIMD}
row = next(r for r in torchfix_core.status() if r.id == "{FIX}")
print(json.dumps({{"ok": True, "state": str(row.state), "reason": row.reason}}))
"""


def forced_state() -> dict[str, Any]:
    """The fix's state and reason when forced onto this torch (``TORCHFIX_FORCE``), every other fix off."""
    env = {**only_fix(FIX, True), "TORCHFIX_AUTOLOAD": "0", "TORCHFIX_FORCE": FIX}
    return run_json_script(["-c", _FORCED_STATE], env=env, timeout=300)


def run(scenario: str, *options: str, fix: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One scenario in a fresh interpreter, this fix alone on (``fix``) or off, every other fix off."""
    return run_json_script([SCENARIOS, scenario, *options], env={**only_fix(FIX, fix), **(env or {})}, timeout=600)


def assert_ok(r: dict[str, Any]) -> None:
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')}\n{r.get('traceback', '')}"
