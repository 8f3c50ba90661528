"""The autotune fix's signature and report counts, from the CPU emulation (``_emulation.py``).

The red run is the emulation without the mode filter (``plain``, the fix disabled): on torch with
strict SAC replay (2.13+) torch's own ``_CachedTorchDispatchMode`` raises "aten.empty.memory_format
encountered during backward but not found in storage" for the allocation the emulated cold
autotuner dispatches inside the recompute; that captured output is given to ``torchfix-doctor
explain``, which must name the fix as ``not-installed`` (only the core and the family catalog (torchfix-all's) importable) and as
``disabled`` (this environment, the fix turned off). The GPU reproduction (test_gpu.py) makes the
same assertions on the real ``CachingAutotuner``.

The green run (``filtered``: the emulated autotuner wrapped by the fix's own wrapper factory) shows
``hid-modes`` in ``torchfix_core.report()``; the red run, with the fix disabled, shows nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from _autotune_helpers import compiled_code_runs_under_sac, run_script
from torchfix_core.testing import assert_explained_both_ways, failure_text

FIX_ID = "autotune"


@pytest.fixture(scope="module")
def emulation_without() -> dict[str, Any]:
    return run_script("_emulation.py", "plain", env={"TORCHFIX_DISABLE": FIX_ID})


@pytest.fixture(scope="module")
def emulation_with() -> dict[str, Any]:
    return run_script("_emulation.py", "filtered")


def test_cold_autotune_red_run_is_explained(emulation_without: dict[str, Any], strict: bool) -> None:
    if not strict:
        pytest.skip("SAC replay is lenient on this torch (<= 2.12): the red run passes, nothing to explain")
    red = emulation_without
    assert red["ok"] is False, red
    assert red["error_type"] == "builtins.RuntimeError", red
    text = failure_text(red)
    assert "aten.empty.memory_format encountered during backward but not found in storage" in text
    assert_explained_both_ways(text, FIX_ID)


def test_cold_autotune_green_run_reports_hidden_modes(emulation_with: dict[str, Any]) -> None:
    """The wrapper hid SAC's replay mode for the emulated autotuner's first call in the recompute
    (the emulation calls the wrapper directly, so it acts on every release it runs on)."""
    assert emulation_with["ok"] is True, emulation_with
    if not compiled_code_runs_under_sac():
        pytest.skip("compiled code never runs under SAC's modes here (torch 2.8/2.9): nothing to hide")
    report = emulation_with["report"]
    assert report["events"]["hid-modes"] == 1, report  # the one cold call inside the recompute


def test_disabled_run_reports_nothing(emulation_without: dict[str, Any]) -> None:
    report = emulation_without["report"]
    assert report["state"] == "disabled", report
    assert report["acted"] == 0, report
