"""Helpers of the fsdp-offload-hook tests (a test harness, not shipped in the wheel)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from torchfix_core.testing import only_fix, reproduce, run_json_script

SCENARIOS = Path(__file__).resolve().parent / "_scenarios.py"
FIX = "fsdp-offload-hook"
MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param_group"

#: Upstream's fix (PR #180666), seen in torch's own code with torchfix off (never through the fix's
#: probe): ``foreach_reduce`` (under its ``no_grad`` decorator) has the local ``has_post_acc_grad_hook``.
_UPSTREAM = f"""
import json, inspect
import {MODULE} as m
print(json.dumps({{"fixed": "has_post_acc_grad_hook" in inspect.unwrap(m.foreach_reduce).__code__.co_varnames}}))
"""


@functools.cache
def upstream_fixed() -> bool:
    """Whether this torch carries upstream's fix."""
    return bool(run_json_script(["-c", _UPSTREAM], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=300)["fixed"])


def run(scenario: str, *options: str, fix: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One scenario in a fresh interpreter, this fix alone on (``fix``) or off, every other fix off."""
    return run_json_script([SCENARIOS, scenario, *options], env={**only_fix(FIX, fix), **(env or {})}, timeout=600)


def reproduce_with_report(fix: bool) -> dict[str, Any]:
    """The fix's declared reproduction, this fix alone on (``fix``) or off, with the report its
    interpreter wrote (``torchfix_core.testing.reproduce(..., with_report=True)``)."""
    return reproduce(FIX, fix, with_report=True)


def assert_ok(r: dict[str, Any]) -> None:
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')}\n{r.get('traceback', '')}"
