"""The wrappers sit on the real ``CachingAutotuner``, filter the modes while the real method body
runs, and revert by identity. (CPU: the methods are entered with a minimal duck-typed ``self`` whose
first attribute read records the mode stack and stops the method; no Triton needed.)"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import torchfix_core
from _autotune_helpers import compiled_code_runs_under_sac
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
from torchfix_autotune import patch as fix_patch
from torchfix_autotune.modes import current_stack
from torchfix_autotune.probes import PATCH_POINTS
from torchfix_core.patching import is_torchfix_wrapper


class _Stop(Exception):
    pass


class _Duck:
    """Stands in for the autotuner/launcher *instance*: records the mode stack at the first
    attribute the real method reads, then stops the method."""

    def __init__(self, seen: list[list[Any]]) -> None:
        object.__setattr__(self, "_seen", seen)

    def __getattr__(self, name: str) -> Any:
        self._seen.append(current_stack())
        raise _Stop(name)


class _Keep(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def _autotuner_cls() -> type:
    import torch._inductor.runtime.triton_heuristics as th

    return th.CachingAutotuner


@pytest.fixture
def installed() -> Iterator[type]:
    """The wrappers installed: by the registry where the probe says so, else by the fix itself."""
    cls = _autotuner_cls()
    torchfix_core.apply(only=["autotune"])
    state = next(r.state for r in torchfix_core.status() if r.id == "autotune")
    if state == "applied":
        yield cls
        return
    impl = fix_patch.AutotuneFix("autotune")  # lenient torch: install by hand to test the wrappers
    impl.apply()
    try:
        yield cls
    finally:
        assert impl.revert() == []


def test_wrappers_are_installed_on_the_real_caching_autotuner(installed: type) -> None:
    for name in PATCH_POINTS:
        raw = installed.__dict__[name]
        assert is_torchfix_wrapper(raw), name
        assert raw.__wrapped__.__qualname__ == f"CachingAutotuner.{name}"
        assert raw.__wrapped__.__module__ == "torch._inductor.runtime.triton_heuristics"


def _call(cls: type, name: str, seen: list[list[Any]]) -> None:
    duck = _Duck(seen)
    if name == "autotune_to_one_config":
        getattr(cls, name)(duck)
    else:
        getattr(cls, name)(duck, _Duck(seen))


@pytest.mark.skipif(
    not compiled_code_runs_under_sac(),
    reason="SAC's modes do not declare ignore_compile_internals() here (torch 2.8/2.9): the filter keeps them, and compiled code never runs under them",
)
@pytest.mark.parametrize("name", list(PATCH_POINTS))
def test_installed_wrapper_hides_sac_mode_inside_the_real_method(installed: type, name: str) -> None:
    def save_everything(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE

    record, _ = create_selective_checkpoint_contexts(save_everything)
    low, high = _Keep(), _Keep()
    seen: list[list[Any]] = []
    fix_patch.reset_stats()
    with low, record, high:
        with pytest.raises(_Stop):
            _call(installed, name, seen)
        assert current_stack() == [low, record, high], "stack not restored after the method raised"
    assert seen and seen[0] == [low, high], f"inside the real {name}: {seen[0]!r}"
    assert fix_patch.STATS["calls"][name] == 1
    assert fix_patch.STATS["filtered"][name] == 1
    assert fix_patch.STATS["hidden"][type(record).__name__] == 1


@pytest.mark.parametrize("name", list(PATCH_POINTS))
def test_installed_wrapper_on_an_empty_stack_calls_straight_through(installed: type, name: str) -> None:
    seen: list[list[Any]] = []
    fix_patch.reset_stats()
    with pytest.raises(_Stop):
        _call(installed, name, seen)
    assert seen[0] == []
    assert fix_patch.STATS["calls"][name] == 1 and fix_patch.STATS["filtered"][name] == 0


def test_revert_restores_the_original_functions_by_identity(strict: bool) -> None:
    cls = _autotuner_cls()
    torchfix_core.apply(only=["autotune"])
    if not strict:
        impl = fix_patch.AutotuneFix("autotune")
        originals = {name: cls.__dict__[name] for name in PATCH_POINTS}
        impl.apply()
        assert all(cls.__dict__[n] is not originals[n] for n in PATCH_POINTS)
        assert impl.revert() == []
        assert all(cls.__dict__[n] is originals[n] for n in PATCH_POINTS)
        return
    wrappers = {name: cls.__dict__[name] for name in PATCH_POINTS}
    assert all(is_torchfix_wrapper(w) for w in wrappers.values())
    torchfix_core.revert(only=["autotune"])
    try:
        for name, wrapper in wrappers.items():
            assert cls.__dict__[name] is wrapper.__wrapped__, name
            assert not is_torchfix_wrapper(cls.__dict__[name])
    finally:
        torchfix_core.apply(only=["autotune"])
    assert all(is_torchfix_wrapper(cls.__dict__[n]) for n in PATCH_POINTS)
    assert next(r.state for r in torchfix_core.status() if r.id == "autotune") == "applied"
