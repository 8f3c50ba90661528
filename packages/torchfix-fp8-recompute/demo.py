"""Demo section of torchfix-fp8-recompute (``python packages/torchfix-fp8-recompute/demo.py``, CPU).

TransformerEngine needs CUDA, so this runs TE's *real Python sources* (``transformer-engine`` wheel,
``DEMO_TE_VERSION``, default 2.18.0) with the test tree's stand-in for the compiled extension, in a
TE test environment that it creates once with ``tests/te_standins/make_env.py`` (under
``$FP8_RECOMPUTE_TE_ENVS``, default ``~/.cache/torchfix/te-envs``; needs uv and the registry) and
reuses afterwards. Each case runs ``tests/te_scenarios.py`` in a fresh process, without the fix
(``TORCHFIX_DISABLE=fp8-recompute``) and with it: two training steps of ``te.checkpoint`` around a
callable that opens its own FP8 autocast (delayed scaling). If the environment cannot be made, the
section says so and exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests" / "te_standins"))

from make_env import make_env  # noqa: E402

VERSION = os.environ.get("DEMO_TE_VERSION", "2.18.0")
PAIRING_CASES = {  # te_pairing_scenarios.py (TE PR #3394): what each case shows
    "eval-reentrant-recompute-train": "eval() module under te.checkpoint",
    "nograd-accumulate-reentrant": "3 checkpoints under no_grad",
    "nograd-stale-reentrant": "recompute after a no_grad checkpoint",
    "nested-ineligible": "inner checkpoint, no grad input",
}


def scenarios(python: Path, fix: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    if not fix:
        env["TORCHFIX_DISABLE"] = "fp8-recompute"
    proc = subprocess.run(
        [str(python), str(HERE / "tests" / "te_scenarios.py")], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1:])
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def describe(result: dict[str, Any]) -> str:
    if result["error"]:
        return result["error"]
    if result["fp8_forward_scales"]:
        return f"OK; recompute scales {result['fp8_recompute_scales']} == forward {result['fp8_forward_scales']}"
    return "OK; no FP8 recompute state created"


def main() -> None:
    print(f"== torchfix-fp8-recompute (TransformerEngine {VERSION} Python sources, CPU stand-in extension)")
    try:
        python = make_env(VERSION)
    except Exception as exc:  # noqa: BLE001 - no uv / no registry: skip the section
        print(f"skipped: cannot create the TE {VERSION} test environment ({type(exc).__name__}: {exc})")
        return
    with ThreadPoolExecutor(2) as pool:  # two independent processes
        without_run, with_run = pool.submit(scenarios, python, False), pool.submit(scenarios, python, True)
        without, with_ = without_run.result(), with_run.result()
    print(f"fix state: without -> {without['fix_state']}, with -> {with_['fix_state']} ({with_['fix_reason']})")
    for name in ("inner-reentrant", "inner-nonreentrant", "mixed-reentrant", "mixed-nonreentrant", "nonfp8-reentrant"):
        print(f"{name:<20} without fix: {describe(without[name])}")
        print(f"{'':<20} with fix:    {describe(with_[name])}")


def pairing_scenarios(python: Path, fix: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    if not fix:
        env["TORCHFIX_DISABLE"] = "fp8-recompute-pairing"
    script = HERE / "tests" / "te_pairing_scenarios.py"
    proc = subprocess.run([str(python), str(script)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1:])
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def describe_pairing(name: str, result: dict[str, Any]) -> str:
    if result["error"]:
        return result["error"]
    if "last_recompute_scale" in result:
        rec, fwd = result["last_recompute_scale"], result["last_forward_scale"]
        return f"recompute scale {rec} {'==' if rec == fwd else '!='} its forward's {fwd}"
    if name == "nested-ineligible":
        return f"(recompute region, phase) seen by the inner body: {result['observed']}"
    return f"stashes left per module: {result['buffer_lens'] or [0]}"


def pairing_main() -> None:
    print(f"== fp8-recompute-pairing (TE PR #3394; TransformerEngine {VERSION} Python sources, CPU stand-in extension)")
    try:
        python = make_env(VERSION)
    except Exception as exc:  # noqa: BLE001 - no uv / no registry: skip the section
        print(f"skipped: cannot create the TE {VERSION} test environment ({type(exc).__name__}: {exc})")
        return
    with ThreadPoolExecutor(2) as pool:
        without_run, with_run = (
            pool.submit(pairing_scenarios, python, False),
            pool.submit(pairing_scenarios, python, True),
        )
        without, with_ = without_run.result(), with_run.result()
    print(f"fix state: without -> {without['fix_state']}, with -> {with_['fix_state']} ({with_['fix_reason']})")
    for name, what in PAIRING_CASES.items():
        print(f"{what:<40} without fix: {describe_pairing(name, without[name])}")
        print(f"{'':<40} with fix:    {describe_pairing(name, with_[name])}")


if __name__ == "__main__":
    main()
    pairing_main()
