"""pytorch#185372 on the running torch: two compiled backwards of one ``backward()`` at the same time.

Region A's compiled backward runs on the calling thread, region B's on the autograd engine's worker
thread of a second device (torch's Python ``PrivateUse1`` backend stands in for a GPU on a CPU-only
machine); both wait for each other inside their compiled bodies (``reproduction_backward_context.py``).
torch 2.12 and 2.13 hand both the one ``contextvars.Context`` that ``_engine_run_backward`` stored and
enter it with ``Context.run``: the second raises "cannot enter context ... is already entered". Each
case runs in a fresh interpreter, every other torchfix fix disabled unless the case says so
(``TORCHFIX_BACKWARD_CONTEXT_ENABLED=0`` = without the fix).
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from torchfix_core.testing import fix_switch, only_fix, reproduce, run_json_script, state_to_expect

#: the scenario, shipped in the wheel behind the declared reproduction (``python -m`` it)
SCENARIOS = "torchfix_sac_replay.reproduction_backward_context"
FIX_ID = "backward-context"
#: Where the reproduction fails without the fix, established by running it on each release (see
#: docs/fixes/backward-context.md): 2.12 and 2.13 enter the shared Context; 2.11 and older store none;
#: 2.14.1+ carry upstream's copy (PR #186659).
AFFECTED = ("2.12.", "2.13.")
BUG_PRESENT = torch.__version__.startswith(AFFECTED)
#: torch 2.12+ hands the caller's context to backward's threads (the feature the bug is in); 2.11 and
#: older (2.8-2.11 run) do not, so there a worker thread sees a ContextVar's default (torch's behaviour,
#: not changed).
PROPAGATES = not torch.__version__.startswith(("2.8.", "2.9.", "2.10.", "2.11."))
MESSAGE = "cannot enter context: <_contextvars.Context object at"
#: the scenario's second device is torch's Python backend (``_DummyBackendModule``, absent on 2.8/2.9,
#: where the fix is out-of-range and, forced, not-needed: the contract's forced_out_of_range case)
pytestmark = pytest.mark.skipif(
    not hasattr(importlib.import_module("torch.utils.backend_registration"), "_DummyBackendModule"),
    reason="torch has no Python device backend (_DummyBackendModule) for the second device",
)


def run(*args: str, fix: bool, sac_replay: bool = False, timeout: float = 900) -> dict[str, Any]:
    """The scenario with ``ARGS`` in a fresh interpreter with backward-context on or off
    (and sac-replay on or off); every other torchfix fix disabled."""
    env = {**only_fix(FIX_ID, fix), **fix_switch("sac-replay", sac_replay)}
    env["CUDA_VISIBLE_DEVICES"] = ""  # the second device is the Python backend, on every machine
    return run_json_script(["-m", SCENARIOS, "--timeout", "10", *args], env=env, timeout=timeout)


def expected_state() -> str:
    return state_to_expect(FIX_ID, BUG_PRESENT)


def assert_fails_with_reentry(result: dict[str, Any]) -> None:
    assert not result["ok"], "both compiled backwards ran: the bug did not reproduce"
    assert result["error_type"] == "builtins.RuntimeError", result
    assert result["error"].startswith(MESSAGE), result["error"]
    assert result["error"].endswith("is already entered"), result["error"]


def assert_both_ran_concurrently(result: dict[str, Any]) -> None:
    assert result["ok"], result.get("traceback")
    assert result["grad_ok"], "gradients differ from 5 * cos(x)"
    seen = {row["op"]: row for row in result["seen"]}
    assert set(seen) == {"hold_backward", "from_dev"}, result["seen"]
    # two threads (the barrier inside both compiled bodies passed: they ran at the same time) ...
    assert seen["hold_backward"]["thread"] != seen["from_dev"]["thread"], result["seen"]
    # ... and both still saw the ContextVar set before backward() (upstream's propagation contract);
    # before 2.12 only the calling thread does
    assert seen["hold_backward"]["var"] == "set-before-backward", result["seen"]
    assert seen["from_dev"]["var"] == ("set-before-backward" if PROPAGATES else "unset"), result["seen"]


def test_concurrent_compiled_backwards_fails_without_fix() -> None:
    result = run(fix=False)
    assert result["backward-context"] == "disabled"
    if not BUG_PRESENT:
        assert_both_ran_concurrently(result)  # nothing to fix on this torch
        return
    assert_fails_with_reentry(result)


def test_concurrent_compiled_backwards_pass_with_fix() -> None:
    result = run(fix=True)
    assert result["backward-context"] == expected_state()
    assert_both_ran_concurrently(result)


def test_checkpointed_regions_fails_without_fix_even_with_sac_replay() -> None:
    """sac-replay runs each recompute in a copy of its forward's context; that neither causes nor
    cures the shared-Context re-entry of the compiled backwards."""
    result = run("--checkpoint", fix=False, sac_replay=True)
    assert result["backward-context"] == "disabled"
    assert result["checkpoint"]
    if not BUG_PRESENT:
        assert_both_ran_concurrently(result)
        return
    assert_fails_with_reentry(result)


@pytest.mark.parametrize("sac_replay", [True, False], ids=["sac-replay-on", "sac-replay-off"])
def test_checkpointed_regions_pass_with_fix(sac_replay: bool) -> None:
    result = run("--checkpoint", fix=True, sac_replay=sac_replay)
    assert result["backward-context"] == expected_state()
    assert (result["sac-replay"] == "disabled") is not sac_replay
    assert_both_ran_concurrently(result)


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------
#: the declared reproduction's measure where both compiled backwards ran at once
BOTH_RAN = "2 compiled backwards ran at once on 2 threads (calling thread, second device's autograd thread)"


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it() -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``):
    the re-entry error without the fix, both compiled backwards at once with it."""
    if not BUG_PRESENT:
        pytest.skip(f"torch {torch.__version__} does not enter one shared Context from two threads")
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True)
    assert off["outcome"] == {
        "result": "observed",
        "measure": "RuntimeError: cannot enter context: <_contextvars.Context object at 0x...> is already entered",
        "detail": "",
    }, off
    assert off["state"] == "disabled", off
    assert on["outcome"]["result"] == "not-observed" and on["state"] == "applied", on
    assert on["outcome"]["measure"].startswith(BOTH_RAN), on
    assert on["outcome"]["measure"].endswith("seen on 2 of 2 threads"), on


def test_declared_reproduction_shows_no_bug_where_torch_has_none() -> None:
    if BUG_PRESENT:
        pytest.skip("this torch has the bug")
    off = reproduce(FIX_ID, False)
    assert off["outcome"]["result"] == "not-observed", off
    assert off["outcome"]["measure"].startswith(BOTH_RAN), off
