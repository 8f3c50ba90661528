"""The probe's layout checks on stand-in classes (no torch needed): 2.12's layout (no 4x path) is
recognised, 2.13-2.15's gate is recognised, any other shape is refused with a reason."""

from __future__ import annotations

import pytest
from torchfix_core import PatchRefused
from torchfix_inductor_rand4x.patch import gate_layout


class _Kernel:
    def triton_tensor_ndim(self) -> int:
        return 1


V = _Kernel()


class Without4x:
    """torch 2.12: rand / randn draw per element."""

    @staticmethod
    def rand(seed: str, offset: str) -> str:
        return f"tl.rand({seed}, {offset})"

    @staticmethod
    def randn(seed: str, offset: str) -> str:
        return f"tl.randn({seed}, {offset})"


class With4x:
    """torch 2.13 / 2.14: the gate and its two callers."""

    @staticmethod
    def rand(seed: str, offset: str) -> str:
        if With4x._can_use_4x_random():
            return f"triton_helpers.rand4x({seed}, {offset}, XBLOCK)"
        return f"tl.rand({seed}, {offset})"

    @staticmethod
    def _can_use_4x_random() -> bool:
        return V.triton_tensor_ndim() == 1

    @staticmethod
    def randn(seed: str, offset: str) -> str:
        if With4x._can_use_4x_random():
            return f"triton_helpers.randn4x({seed}, {offset}, XBLOCK)"
        return f"tl.randn({seed}, {offset})"


def test_layout_without_4x_path_is_recognised() -> None:
    assert gate_layout(Without4x) is False


def test_layout_with_gate_is_recognised() -> None:
    assert gate_layout(With4x) is True


def test_gate_with_parameters_is_refused() -> None:
    class Bad(With4x):
        rand = With4x.__dict__["rand"]
        randn = With4x.__dict__["randn"]

        @staticmethod
        def _can_use_4x_random(kernel: object) -> bool:
            return V.triton_tensor_ndim() == 1

    with pytest.raises(PatchRefused, match="takes parameters"):
        gate_layout(Bad)


def test_gate_not_a_static_method_is_refused() -> None:
    class Bad:
        rand = With4x.__dict__["rand"]
        randn = With4x.__dict__["randn"]

        @classmethod
        def _can_use_4x_random(cls) -> bool:
            return True

    with pytest.raises(PatchRefused, match="expected a static method"):
        gate_layout(Bad)


def test_gate_without_the_one_d_condition_is_refused() -> None:
    class Bad:
        rand = With4x.__dict__["rand"]
        randn = With4x.__dict__["randn"]

        @staticmethod
        def _can_use_4x_random() -> bool:
            return True

    with pytest.raises(PatchRefused, match="triton_tensor_ndim"):
        gate_layout(Bad)


def test_4x_helper_without_gate_is_refused() -> None:
    class Bad:
        @staticmethod
        def rand(seed: str, offset: str) -> str:
            return f"triton_helpers.rand4x({seed}, {offset}, XBLOCK)"

        randn = Without4x.__dict__["randn"]

    with pytest.raises(PatchRefused, match="without _can_use_4x_random"):
        gate_layout(Bad)


def test_caller_that_skips_the_gate_is_refused() -> None:
    class Bad:
        rand = With4x.__dict__["rand"]
        _can_use_4x_random = With4x.__dict__["_can_use_4x_random"]

        @staticmethod
        def randn(seed: str, offset: str) -> str:
            return f"triton_helpers.randn4x({seed}, {offset}, XBLOCK)"

    with pytest.raises(PatchRefused, match="randn does not emit"):
        gate_layout(Bad)
