"""Semantics of ``without_compile_internal_modes`` on the real dispatch mode stack (CPU, real torch)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
from _autotune_helpers import compiled_code_runs_under_sac
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.checkpoint import create_selective_checkpoint_contexts
from torchfix_autotune.modes import current_stack, is_hidden, without_compile_internal_modes
from torchfix_core.probes import counting_mode_class

#: a plain user mode (ignore_compile_internals() is False) recording what it sees: must stay
Keep: Any = counting_mode_class()


class Ignore(Keep):
    """A user mode that declares ignore_compile_internals(): must be hidden."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True


def test_empty_stack_yields_nothing_hidden() -> None:
    assert current_stack() == []
    with without_compile_internal_modes() as hidden:
        assert hidden == []
        assert current_stack() == []
    assert current_stack() == []


def test_filter_hides_ignore_modes_and_keeps_others_in_order() -> None:
    a, b, c, d = Keep(), Ignore(), Keep(), Ignore()
    with a, b, c, d:
        before = current_stack()
        with without_compile_internal_modes() as hidden:
            assert current_stack() == [a, c]
            assert hidden == [b, d]
            torch.empty(3).zero_()
        assert current_stack() == before == [a, b, c, d]
    assert a.seen and c.seen and not b.seen and not d.seen
    assert current_stack() == []


@pytest.mark.skipif(
    not compiled_code_runs_under_sac(),
    reason="SAC's modes do not declare ignore_compile_internals() here (torch 2.8/2.9): the filter keeps them, and compiled code never runs under them",
)
def test_filter_hides_real_sac_modes_and_debug_mode() -> None:
    record, replay = create_selective_checkpoint_contexts([torch.ops.aten.mm.default])
    assert is_hidden(record) and is_hidden(replay)
    try:
        from torch.utils._debug_mode import DebugMode
    except ImportError:  # torch < 2.10 layout
        DebugMode = None  # type: ignore[assignment,misc]  # noqa: N806
    if DebugMode is not None:
        assert is_hidden(DebugMode())
    keep = Keep()
    with keep, record:
        with without_compile_internal_modes() as hidden:
            assert hidden == [record]
            assert current_stack() == [keep]


def test_filter_leaves_infra_fake_mode_in_place() -> None:
    fake, a, b = FakeTensorMode(), Keep(), Ignore()
    with fake, a, b:
        assert current_stack() == [fake, a, b]
        with without_compile_internal_modes() as hidden:
            assert hidden == [b]
            assert current_stack() == [fake, a]
        assert current_stack() == [fake, a, b]


def test_stack_is_restored_after_an_exception() -> None:
    a, b, c = Ignore(), Keep(), Ignore()
    with a, b, c:
        with pytest.raises(ZeroDivisionError):
            with without_compile_internal_modes():
                assert current_stack() == [b]
                raise ZeroDivisionError
        assert current_stack() == [a, b, c]


@pytest.mark.skipif(
    tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 11),
    reason="torch 2.10: dropping the leaked mode on restore makes a later mode push segfault "
    "(matrix run 2026-11-29); the fix's validated range starts at 2.11",
)
def test_stack_is_restored_even_if_the_body_leaks_a_mode() -> None:
    a, b = Keep(), Ignore()
    with a, b:
        with without_compile_internal_modes():
            Keep().__enter__()  # leaked on purpose
            assert len(current_stack()) == 2
        assert current_stack() == [a, b]


def test_nested_filters_are_reentrant() -> None:
    a, b, c = Keep(), Ignore(), Keep()
    with a, b, c:
        with without_compile_internal_modes() as outer:
            assert outer == [b]
            with without_compile_internal_modes() as inner:
                assert inner == []
                assert current_stack() == [a, c]
                inner_mode = Ignore()
                with inner_mode:  # a mode entered inside is filtered by a deeper call
                    with without_compile_internal_modes() as deepest:
                        assert deepest == [inner_mode]
                        assert current_stack() == [a, c]
                    assert current_stack() == [a, c, inner_mode]
            assert current_stack() == [a, c]
        assert current_stack() == [a, b, c]


def test_filter_is_per_thread() -> None:
    """The stack is thread-local: filtering in one thread never changes another's stack."""
    main_b = Ignore()
    errors: list[BaseException] = []
    inside = threading.Event()
    release = threading.Event()

    def worker() -> None:
        try:
            w_keep, w_ign = Keep(), Ignore()
            with w_keep, w_ign:
                with without_compile_internal_modes() as hidden:
                    assert hidden == [w_ign]
                    assert current_stack() == [w_keep]
                    inside.set()
                    assert release.wait(10)
                assert current_stack() == [w_keep, w_ign]
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)
            inside.set()

    with main_b:
        thread = threading.Thread(target=worker)
        thread.start()
        assert inside.wait(10)
        assert current_stack() == [main_b]  # the worker's filter did not touch this thread
        with without_compile_internal_modes() as hidden:
            assert hidden == [main_b]
        release.set()
        thread.join(10)
    assert not errors, errors
    assert current_stack() == []
