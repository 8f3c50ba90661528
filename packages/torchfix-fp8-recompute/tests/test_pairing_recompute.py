"""The regression scenarios of TE PR #3394 on TransformerEngine's real Python code (CPU, stand-ins).

Each scenario (``te_pairing_scenarios.py``) runs ``te.checkpoint`` around a callable with a real
``TransformerEngineBaseModule`` (TE's own ``prepare_forward`` / ``end_forward``, delayed scaling),
once with the fix and once with ``TORCHFIX_DISABLE=fp8-recompute-pairing``. The forms of upstream's
five tests, and two of torchfix's own (a module put in ``eval()`` after a training step; the silent
stale scale a stash left under ``no_grad`` gives a later recompute).

On TE 2.18-2.19 the unpatched runs fail (KeyError / IndexError at the recompute, stashes piling up,
a stale recompute scale, the enclosing recompute phase lost); on TE 2.20.2 (upstream fix) the fix
reports not-needed and both runs pass. Then the declared reproduction (the reproduction's
``eval_module``, non-reentrant, recompute in training mode, the autocast around the checkpoint) as
``torchfix-doctor verify`` runs it: fp8-recompute off too, which it does not need.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import pytest
from _fp8_helpers import KEY_ERROR, MODES, TE_INSTALLED, pairing_out_of_range, requires_te, run_scenarios
from torchfix_core.testing import reproduce
from torchfix_core.testing.fixtures import with_and_without_fix

OUT_OF_RANGE = pairing_out_of_range() if TE_INSTALLED else ""
# Outside the validated range only test_pairing_out_of_range.py runs.
pytestmark = [requires_te, pytest.mark.skipif(bool(OUT_OF_RANGE), reason=OUT_OF_RANGE or "in range")]

EVAL_CASES = [f"eval-{m}-recompute-{r}" for m in MODES for r in ("train", "eval")]
PAIRING_ID = "fp8-recompute-pairing"
#: the declared reproduction's case (its outcome's detail)
DECLARED_CASE = (
    "a TE module in eval() under te.checkpoint(use_reentrant=False), delayed-scaling FP8 autocast around "
    "the checkpoint, put in train() before the backward"
)

# This module's scenarios (te_pairing_scenarios.py), over conftest's te_scenarios.py pair.
with_fix, without_fix = with_and_without_fix(functools.partial(run_scenarios, "fp8-recompute-pairing"))


@pytest.fixture(scope="module")
def bug_present(without_fix: dict[str, Any]) -> bool:
    """From TE's own code (the fix disabled): does it lack PR #3394? Read by conftest's
    ``buggy_te`` / ``fixed_te``."""
    marks = without_fix["code_has_pr3394"]
    assert not any(without_fix["code_is_torchfix"].values())
    assert len(set(marks.values())) == 1, marks  # all three functions, or none
    return not next(iter(marks.values()))


def _drained(result: dict[str, Any], *layers: str) -> None:
    """Upstream's _assert_fp8_recompute_state_drained: one stash per module, consumed, scale restored."""
    assert result["error"] is None, result.get("traceback_tail")
    assert len(result["buffer_lens"]) == len(layers) and not any(result["buffer_lens"]), result
    for name in layers:
        assert result[name]["stash_key"] and result[name]["stash_len"] == 0, result
        assert result[name]["restored"] is True, result
    assert result["first_module_entries"] == 0


def _no_stash(result: dict[str, Any]) -> None:
    assert result["error"] is None, result.get("traceback_tail")
    assert not result["layer"]["stash_key"] and not any(result["buffer_lens"]), result
    assert result["first_module_entries"] == 0, result


# -- upstream: test_checkpoint_eval_module_balances_fp8_recompute_state -----------------------------


@pytest.mark.parametrize("case", EVAL_CASES)
def test_eval_module_recompute_fails_without_fix(case: str, without_fix: dict[str, Any], buggy_te: None) -> None:
    result = without_fix[case]
    assert result["error"] == KEY_ERROR, result
    assert not result["layer"]["stash_key"]


@pytest.mark.parametrize("case", EVAL_CASES)
def test_eval_module_balances_recompute_state_with_fix(case: str, with_fix: dict[str, Any]) -> None:
    result = with_fix[case]
    _drained(result, "layer")
    assert result["inp_grad"] and result["layer"]["grad"]


def test_eval_after_training_step_fails_without_fix(mode: str, without_fix: dict[str, Any], buggy_te: None) -> None:
    result = without_fix[f"eval-after-train-{mode}"]
    assert result["error"] == "IndexError: pop from an empty deque", result
    assert result["steps_done"] == [0]


def test_eval_after_training_step_with_fix(mode: str, with_fix: dict[str, Any]) -> None:
    result = with_fix[f"eval-after-train-{mode}"]
    _drained(result, "layer")
    assert result["steps_done"] == [0, 1]


# -- upstream: test_checkpoint_without_autograd_does_not_accumulate_recompute_stashes ---------------


def test_nograd_checkpoint_piles_up_stashes_without_fix(mode: str, without_fix: dict[str, Any], buggy_te: None) -> None:
    result = without_fix[f"nograd-accumulate-{mode}"]
    assert result["observed"] == [[True, False]] * 3
    assert result["buffer_lens"] == [3] and result["layer"]["stash_len"] == 3, result
    assert result["first_module_entries"] == 3  # is_first_fp8_module entries, never popped


def test_nograd_checkpoint_leaves_no_state_with_fix(mode: str, with_fix: dict[str, Any]) -> None:
    result = with_fix[f"nograd-accumulate-{mode}"]
    assert result["observed"] == [[False, False]] * 3
    _no_stash(result)


def test_nograd_stash_gives_later_recompute_a_stale_scale_without_fix(
    mode: str, without_fix: dict[str, Any], buggy_te: None
) -> None:
    """Silent: no error, but the recompute runs with the scale of another forward."""
    result = without_fix[f"nograd-stale-{mode}"]
    assert result["error"] is None, result.get("traceback_tail")
    assert len(result["last_forward_scale"]) == len(result["last_recompute_scale"]) == 1
    assert result["last_recompute_scale"] != result["last_forward_scale"], result
    assert result["buffer_lens"] == [1]  # the stale stash of the no_grad call is still there... shifted


def test_recompute_uses_its_own_forward_scale_with_fix(mode: str, with_fix: dict[str, Any]) -> None:
    result = with_fix[f"nograd-stale-{mode}"]
    _drained(result, "layer")
    assert result["last_recompute_scale"] == result["last_forward_scale"] != [1.0], result


# -- upstream: test_reentrant_checkpoint_without_grad_input_does_not_stash_fp8_metadata ------------


def test_reentrant_without_grad_input_stashes_without_fix(without_fix: dict[str, Any], buggy_te: None) -> None:
    result = without_fix["reentrant-without-grad-input"]
    assert result["before_valid"] == {"stash_key": True, "buffer_lens": [3], "first_module_entries": 3}
    assert result["observed"][:3] == [[True, False]] * 3
    assert result["buffer_lens"] == [3]  # the valid recompute popped the oldest, unrelated stash


def test_reentrant_without_grad_input_with_fix(with_fix: dict[str, Any]) -> None:
    result = with_fix["reentrant-without-grad-input"]
    assert result["before_valid"] == {"stash_key": False, "buffer_lens": [], "first_module_entries": 0}
    assert result["observed"] == [[False, False]] * 3 + [[True, False], [True, True]]
    assert result["inp_grad"] and result["layer"]["grad"]
    _drained(result, "layer")


# -- upstream: test_ineligible_reentrant_checkpoint_preserves_outer_recompute_context ---------------


def test_nested_ineligible_checkpoint_loses_outer_phase_without_fix(
    without_fix: dict[str, Any], buggy_te: None
) -> None:
    result = without_fix["nested-ineligible"]
    assert result["observed"] == [[True, False], [True, False]]
    assert result["inner"]["stash_len"] == 2 and not result["tail"]["stash_key"], result


def test_nested_ineligible_checkpoint_inherits_outer_phase_with_fix(with_fix: dict[str, Any]) -> None:
    result = with_fix["nested-ineligible"]
    assert result["observed"] == [[True, False], [True, True]]
    assert result["inp_grad"] and result["inner"]["grad"] is None and result["tail"]["grad"]
    _drained(result, "inner", "tail")


# -- upstream: test_checkpoint_without_autograd_preserves_forward_context --------------------------


def test_nograd_checkpoint_with_grad_context_without_fix(without_fix: dict[str, Any], buggy_te: None) -> None:
    """Unpatched, the reentrant Function drops the graph of a non-view output (the stand-in GEMM's);
    te.Linear's output is a view, which survives: upstream's GPU test passes unpatched."""
    result = without_fix["nograd-forward-context"]
    assert result["out_requires_grad"] is False
    assert "does not require grad" in (result["error"] or ""), result


def test_nograd_checkpoint_preserves_forward_context_with_fix(with_fix: dict[str, Any]) -> None:
    result = with_fix["nograd-forward-context"]
    assert result["out_requires_grad"] and result["inp_grad"] and result["layer"]["grad"]
    _no_stash(result)


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(buggy_te: None) -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``,
    every other fix off, fp8-recompute included): TE's stash ``KeyError`` in the recompute without the
    fix; with it, the eval() module's stash made, consumed and its scale restored."""
    off, on = reproduce(PAIRING_ID, False), reproduce(PAIRING_ID, True)
    assert off["outcome"] == {
        "result": "observed",
        "measure": f"{KEY_ERROR} in the recompute",
        "detail": DECLARED_CASE,
    }, off
    assert off["state"] == "disabled", off
    assert on["outcome"] == {
        "result": "not-observed",
        "measure": "the module's recompute stashes left [0], made in its forward: True, live scale restored "
        "after the recompute: True, gradients finite: True",
        "detail": DECLARED_CASE,
    }, on
    assert on["state"] == "applied", on


def test_declared_reproduction_shows_no_bug_where_fixed_upstream(fixed_te: None) -> None:
    off, on = reproduce(PAIRING_ID, False), reproduce(PAIRING_ID, True)
    assert off["outcome"]["result"] == on["outcome"]["result"] == "not-observed", (off, on)
    assert on["state"] == "not-needed", on


# -- the fix's state and footprint ---------------------------------------------------------------


def test_fix_state_matches_te(with_fix: dict[str, Any], without_fix: dict[str, Any], bug_present: bool) -> None:
    assert with_fix["fix_state"] == ("applied" if bug_present else "not-needed"), with_fix["fix_reason"]
    assert without_fix["fix_state"] == "disabled"
    assert with_fix["fp8_recompute_state"] == without_fix["fp8_recompute_state"]  # the other fix is untouched
    assert all(with_fix["code_has_pr3394"].values())
    assert all(with_fix["code_is_torchfix"].values()) is bug_present


def test_upstream_fixed_te_is_left_alone(fixed_te: None, with_fix: dict[str, Any], without_fix: dict[str, Any]) -> None:
    assert "upstream fix" in with_fix["fix_reason"]
    for name in EVAL_CASES + [f"eval-after-train-{m}" for m in MODES]:
        _drained(without_fix[name], "layer")
    for mode in MODES:
        _no_stash(without_fix[f"nograd-accumulate-{mode}"])
        stale = without_fix[f"nograd-stale-{mode}"]
        assert stale["last_recompute_scale"] == stale["last_forward_scale"]
    assert without_fix["nested-ineligible"]["observed"] == [[True, False], [True, True]]
    _no_stash(without_fix["nograd-forward-context"])
    # Same results with torchfix active (it did nothing).
    for name, value in without_fix.items():
        if isinstance(value, dict) and "error" in value:
            assert with_fix[name] == value, name


def test_patch_points_and_exact_revert() -> None:
    """In this process: the three code objects are swapped, tracebacks read the patched lines, and
    revert restores TE's own code objects."""
    import linecache

    import torchfix_core
    import transformer_engine.pytorch  # noqa: F401 - imports distributed.py and module/base.py
    from torchfix_fp8_recompute import pairing

    torchfix_core.revert(only=["fp8-recompute-pairing"])
    originals = [pairing._function(h).__code__ for h in pairing.HUNKS]
    if all(h.fixed(c) for h, c in zip(pairing.HUNKS, originals)):
        pytest.skip("this TE carries the upstream fix")
    try:
        torchfix_core.apply(only=["fp8-recompute-pairing"])
        for hunk, original in zip(pairing.HUNKS, originals):
            func = pairing._function(hunk)
            code = func.__code__
            assert code is not original and hunk.fixed(code) and not hunk.fixed(original)
            assert code.co_name == original.co_name
            assert linecache.getline(code.co_filename, code.co_firstlineno) == linecache.getline(
                original.co_filename, original.co_firstlineno
            )
            assert getattr(code, "co_qualname", None) == getattr(original, "co_qualname", None)
            lines = linecache.getlines(code.co_filename)
            assert hunk.new[-1].strip() in "".join(lines[code.co_firstlineno - 1 :])
        # te.checkpoint (the decorated wrapper, bound by name in several TE modules) reaches the new code
        import transformer_engine.pytorch as te

        assert te.checkpoint.__wrapped__ is pairing._function(pairing.HUNKS[2])
        torchfix_core.revert(only=["fp8-recompute-pairing"])
        assert [pairing._function(h).__code__ for h in pairing.HUNKS] == originals
        assert all(pairing._function(h).__code__ is o for h, o in zip(pairing.HUNKS, originals))
    finally:
        torchfix_core.apply(only=["fp8-recompute-pairing"])


def test_probe_refuses_code_its_source_does_not_reproduce() -> None:
    """A prepare_forward whose running code is not what its source file says: PatchRefused."""
    import torchfix_core
    import transformer_engine.pytorch.module.base as base
    from torchfix_core import PatchRefused
    from torchfix_fp8_recompute import pairing

    torchfix_core.revert(only=["fp8-recompute-pairing"])
    func = base.TransformerEngineBaseModule.prepare_forward
    original = func.__code__
    if pairing.HUNKS[0].fixed(original):
        pytest.skip("this TE carries the upstream fix")

    def prepare_forward(self: Any, inp: Any, num_gemms: int = 1, a: bool = False, b: bool = False) -> Any:
        return inp if self.training else inp

    try:
        where = {"co_filename": original.co_filename, "co_firstlineno": original.co_firstlineno}
        if hasattr(original, "co_qualname"):
            where["co_qualname"] = original.co_qualname
        func.__code__ = prepare_forward.__code__.replace(**where)
        with pytest.raises(PatchRefused, match="does not reproduce the running code"):
            pairing.Fp8RecomputePairingFix("fp8-recompute-pairing").probe()
    finally:
        func.__code__ = original
        torchfix_core.apply(only=["fp8-recompute-pairing"])
    assert isinstance(func, types.FunctionType)
