"""Demo section of torchfix-fp8-recompute (``python packages/torchfix-fp8-recompute/demo.py``, CPU).

TransformerEngine needs CUDA, so this runs TE's *real Python sources* (``transformer-engine`` wheel,
``DEMO_TE_VERSION``, default 2.18.0) with the test tree's stand-in for the compiled extension, in a
TE test environment that it creates once with ``tests/te_standins/make_env.py`` (under
``$FP8_RECOMPUTE_TE_ENVS``, default ``~/.cache/torchfix/te-envs``; needs uv and the registry) and
reuses afterwards. Two sections, one a fix. Each runs the fix's declared reproduction
(``torchfix_fp8_recompute.reproduction``) without and with the fix as ``torchfix-doctor verify``
runs it (every other fix off), then its scenario script, whose cases are the reproduction module's,
in a fresh process without the fix (``TORCHFIX_DISABLE=<fix id>``) and with it: fp8-recompute
(``tests/te_scenarios.py``, TE PR #3284: two training steps of ``te.checkpoint`` around a callable
that opens its own FP8 autocast, delayed scaling) and fp8-recompute-pairing
(``tests/te_pairing_scenarios.py``, TE PR #3394). If the environment cannot be made, each section
says so and the demo exits 0.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from torchfix_core.testing import describe_failure, only_fix, run_json_script, run_json_script_timed

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests" / "te_standins"))

from make_env import make_env  # noqa: E402

VERSION = os.environ.get("DEMO_TE_VERSION", "2.18.0")


def describe(name: str, result: dict[str, Any]) -> str:
    """A ``te_scenarios.py`` (TE PR #3284) result in a line."""
    if result["error"]:
        return result["error"]
    if result["fp8_forward_scales"]:
        return f"OK; recompute scales {result['fp8_recompute_scales']} == forward {result['fp8_forward_scales']}"
    return "OK; no FP8 recompute state created"


def describe_pairing(name: str, result: dict[str, Any]) -> str:
    """A ``te_pairing_scenarios.py`` (TE PR #3394) result in a line."""
    if result["error"]:
        return result["error"]
    if "last_recompute_scale" in result:
        rec, fwd = result["last_recompute_scale"], result["last_forward_scale"]
        return f"recompute scale {rec} {'==' if rec == fwd else '!='} its forward's {fwd}"
    if name == "nested-ineligible":
        return f"(recompute region, phase) seen by the inner body: {result['observed']}"
    return f"stashes left per module: {result['buffer_lens'] or [0]}"


@dataclass(frozen=True)
class Section:
    """One fix's section: its scenario script (under ``tests/``) run without and with the fix."""

    title: str
    fix_id: str  # the "without" run sets TORCHFIX_DISABLE to it (the package's other fix stays on)
    script: str
    cases: Mapping[str, str]  # scenario name -> the label printed
    width: int  # of the label column
    describe: Callable[[str, dict[str, Any]], str]


_INNER = ("inner-reentrant", "inner-nonreentrant", "mixed-reentrant", "mixed-nonreentrant", "nonfp8-reentrant")
SECTIONS = (
    Section(
        f"torchfix-fp8-recompute (TransformerEngine {VERSION} Python sources, CPU stand-in extension)",
        "fp8-recompute",
        "te_scenarios.py",
        {name: name for name in _INNER},
        20,
        describe,
    ),
    Section(
        f"fp8-recompute-pairing (TE PR #3394; TransformerEngine {VERSION} Python sources, CPU stand-in extension)",
        "fp8-recompute-pairing",
        "te_pairing_scenarios.py",
        {
            "eval-reentrant-recompute-train": "eval() module under te.checkpoint",
            "nograd-accumulate-reentrant": "3 checkpoints under no_grad",
            "nograd-stale-reentrant": "recompute after a no_grad checkpoint",
            "nested-ineligible": "inner checkpoint, no grad input",
        },
        40,
        describe_pairing,
    ),
)


def run_section(section: Section) -> None:
    print(f"== {section.title}")
    try:
        python = make_env(VERSION)
    except Exception as exc:  # noqa: BLE001 - no uv / no registry: skip the section
        print(f"skipped: cannot create the TE {VERSION} test environment ({type(exc).__name__}: {exc})")
        return
    script = HERE / "tests" / section.script

    def scenarios(env: dict[str, str] | None) -> dict[str, Any]:
        return run_json_script([script], env=env, python=python)

    def declared(fix: bool) -> dict[str, Any]:
        argv = ["-m", "torchfix_core.reproduction", section.fix_id]
        return run_json_script_timed(argv, env=only_fix(section.fix_id, fix), python=python, timeout=600)

    with ThreadPoolExecutor(2) as pool:  # two independent processes at a time
        reproduced = list(pool.map(declared, [False, True]))
        without, with_ = pool.map(scenarios, [{"TORCHFIX_DISABLE": section.fix_id}, None])
    print("declared reproduction (what torchfix-doctor verify runs, every other fix off):")
    for label, r in zip(("without fix:", "with fix:   "), reproduced):
        outcome = r.get("outcome")
        told = f"{outcome['result']}: {outcome['measure']}" if outcome else describe_failure(r, 100)
        print(f"  {label} {told}")
    print(f"fix state: without -> {without['fix_state']}, with -> {with_['fix_state']} ({with_['fix_reason']})")
    w = section.width
    for name, label in section.cases.items():
        print(f"{label:<{w}} without fix: {section.describe(name, without[name])}")
        print(f"{'':<{w}} with fix:    {section.describe(name, with_[name])}")


def main() -> None:
    for section in SECTIONS:
        run_section(section)


if __name__ == "__main__":
    main()
