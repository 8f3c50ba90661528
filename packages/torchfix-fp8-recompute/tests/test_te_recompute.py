"""The regression scenarios of TE PR #3284 on TransformerEngine's real Python code (CPU, stand-ins).

Each scenario (see ``te_scenarios.py``: the shipped reproduction's ``recompute_steps``) runs two
training steps of ``te.checkpoint`` around a callable, reentrant and non-reentrant, once with the fix
and once with ``TORCHFIX_DISABLE``:

* ``inner``: the callable opens ``te.autocast(enabled=True)`` (delayed scaling) itself;
* ``nonfp8``: no FP8 anywhere;
* ``mixed``: an FP8 layer under the inner autocast, then a layer outside it.

On TE 1.13-2.18 the unpatched run fails in the first recompute with
``KeyError: 'global_fp8_buffer_pos_fwd_recompute'``; on TE 2.19+ (upstream fix) the fix reports
not-needed and both runs must agree. Then the declared reproduction (``inner``, non-reentrant) as
``torchfix-doctor verify`` runs it.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
from _fp8_helpers import KEY_ERROR, requires_te, te_has_upstream_fix
from torchfix_core.testing import reproduce

pytestmark = requires_te

FIX_ID = "fp8-recompute"
#: the declared reproduction's case (its outcome's detail)
DECLARED_CASE = (
    "2 training steps of te.checkpoint(use_reentrant=False) around a callable that opens its own "
    "delayed-scaling FP8 autocast"
)

# Upstream's expectation (TE PR #3284 test): (FP8 outside the inner autocast, inside, recompute
# phase) recorded in the body: forward, then recompute; here for each of two steps.
BODY_STATES = [[False, True, False], [False, True, True]] * 2


def _assert_fp8_region_ok(result: dict[str, Any]) -> None:
    assert result["error"] is None, result.get("traceback_tail")
    assert result["body_states"] == BODY_STATES
    assert result["stash_key"]["fp8"], "the FP8 layer did not stash its scale/amax for the recompute"
    # The recompute used the scale of its own forward (not a stale or updated one).
    assert result["fp8_recompute_scales"] == result["fp8_forward_scales"]
    assert len(result["fp8_forward_scales"]) == 2


@pytest.fixture(scope="module")
def bug_present() -> bool:
    """Does this TE lack PR #3284 (TE <= 2.18)? Read by conftest's ``buggy_te`` / ``fixed_te``."""
    return not te_has_upstream_fix()


def test_inner_autocast_recompute_fails_without_fix(mode: str, without_fix: dict[str, Any], buggy_te: None) -> None:
    result = without_fix[f"inner-{mode}"]
    assert result["error"] == KEY_ERROR, result
    assert not result["stash_key"]["fp8"]
    assert result["fp8_recompute_scales"] == []


def test_inner_autocast_recompute_passes_with_fix(mode: str, with_fix: dict[str, Any]) -> None:
    _assert_fp8_region_ok(with_fix[f"inner-{mode}"])


def test_mixed_region_fails_without_fix(mode: str, without_fix: dict[str, Any], buggy_te: None) -> None:
    assert without_fix[f"mixed-{mode}"]["error"] == KEY_ERROR


def test_mixed_region_stashes_only_fp8_layer_with_fix(mode: str, with_fix: dict[str, Any]) -> None:
    result = with_fix[f"mixed-{mode}"]
    _assert_fp8_region_ok(result)
    assert not result["stash_key"]["plain"], "a layer outside the inner autocast got FP8 recompute state"


@pytest.mark.parametrize("fixed", [True, False], ids=["with_fix", "without_fix"])
def test_non_fp8_region_creates_no_recompute_state(
    mode: str, fixed: bool, with_fix: dict[str, Any], without_fix: dict[str, Any]
) -> None:
    result = (with_fix if fixed else without_fix)[f"nonfp8-{mode}"]
    assert result["error"] is None, result.get("traceback_tail")
    assert result["stash_key"] == {"fp8": False, "plain": False}
    assert result["body_states"] == []


def test_fix_state_matches_te(with_fix: dict[str, Any], without_fix: dict[str, Any], bug_present: bool) -> None:
    assert with_fix["fix_state"] == ("applied" if bug_present else "not-needed"), with_fix["fix_reason"]
    assert without_fix["fix_state"] == "disabled"


def test_upstream_fixed_te_is_left_alone(fixed_te: None, with_fix: dict[str, Any], without_fix: dict[str, Any]) -> None:
    assert "upstream fix" in with_fix["fix_reason"]
    for name in ("inner-reentrant", "inner-nonreentrant", "mixed-reentrant", "mixed-nonreentrant"):
        _assert_fp8_region_ok(without_fix[name])
        _assert_fp8_region_ok(with_fix[name])


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(buggy_te: None) -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``,
    every other fix off): TE's stash ``KeyError`` without the fix, each recompute on its forward's
    FP8 scale with it."""
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True)
    assert off["outcome"] == {
        "result": "observed",
        "measure": f"{KEY_ERROR} in the first recompute",
        "detail": DECLARED_CASE,
    }, off
    assert off["state"] == "disabled", off
    assert on["outcome"]["result"] == "not-observed" and on["outcome"]["detail"] == DECLARED_CASE, on
    assert on["outcome"]["measure"].startswith("the recomputes' FP8 scales [1.0, "), on
    assert on["state"] == "applied", on


def test_declared_reproduction_shows_no_bug_where_fixed_upstream(fixed_te: None) -> None:
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True)
    assert off["outcome"]["result"] == on["outcome"]["result"] == "not-observed", (off, on)
    assert on["state"] == "not-needed", on


def test_getter_reaches_every_by_name_binding(buggy_te: None) -> None:
    """Every TE module that imported the getter by name answers the fixed logic; revert restores it."""
    import sys

    import torchfix_core
    import transformer_engine.pytorch  # noqa: F401 - imports module/base.py, linear.py, ...
    import transformer_engine.pytorch.distributed as dist

    torchfix_core.apply(only=["fp8-recompute"])
    getter = dist.is_fp8_activation_recompute_enabled
    bindings = {
        name: mod
        for name, mod in sys.modules.items()
        if name.startswith("transformer_engine.")
        and isinstance(mod, types.ModuleType)
        and getattr(mod, "is_fp8_activation_recompute_enabled", None) is getter
    }
    assert "transformer_engine.pytorch.module.base" in bindings, sorted(bindings)
    original = next(orig for owner, name, orig in _originals() if name == "__code__")
    try:
        for mod in bindings.values():
            assert "is_fp8_enabled" in mod.is_fp8_activation_recompute_enabled.__code__.co_names
        # Region entered with FP8 off: the fixed getter answers "FP8 now" (False now).
        with dist.activation_recompute_forward(activation_recompute=True, recompute_phase=False):
            assert dist._FP8_ACTIVATION_RECOMPUTE_ENABLED is True
            assert getter() is False
        assert dist._FP8_ACTIVATION_RECOMPUTE_ENABLED is False
        torchfix_core.revert(only=["fp8-recompute"])
        assert getter.__code__ is original
        assert "__torchfix_fix__" not in vars(dist.activation_recompute_forward.__dict__["__enter__"])
    finally:
        torchfix_core.apply(only=["fp8-recompute"])


def _originals() -> list[tuple[object, str, Any]]:
    from torchfix_core.testing import live_patches

    return live_patches("fp8-recompute")
