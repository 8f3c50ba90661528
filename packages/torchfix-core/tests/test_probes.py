"""The generic probe helpers (torchfix_core.probes), on the installed (real) torch."""

from __future__ import annotations

import pytest
import torch
from torchfix_core import PatchRefused
from torchfix_core.probes import counting_mode, isolated, method_parameters, require_parameters


def test_counting_mode_records_every_op() -> None:
    mode = counting_mode()
    with mode:
        torch.ones(2).sin()
    assert [op for op in mode.seen if "sin" in op] == ["aten.sin.default"], mode.seen


def test_isolated_hides_the_callers_modes_and_restores_them() -> None:
    outer = counting_mode()
    with outer:
        torch.ones(1)
        inside = isolated(lambda: torch.zeros(1).add(1).item())
        torch.ones(1)
    assert inside == 1.0
    assert len(outer.seen) == 2 and not any("add" in op or "zeros" in op for op in outer.seen), outer.seen


class _Layout:
    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b


class _Subclass(_Layout):
    pass


def test_method_parameters_reads_the_class_own_method() -> None:
    assert method_parameters(_Layout, "__init__") == ("self", "a", "b")
    assert method_parameters(_Subclass, "__init__") is None  # inherited: not this class's layout
    assert method_parameters(None, "__init__") is None


def test_require_parameters_refuses_unknown_layouts_with_the_reason() -> None:
    require_parameters(_Layout, "__init__", ("self", "a", "b"), where="_Layout.__init__")
    with pytest.raises(PatchRefused, match=r"^_Layout.__init__ has parameters \('self', 'a', 'b'\), expected"):
        require_parameters(_Layout, "__init__", ("self", "a"), where="_Layout.__init__")
    with pytest.raises(PatchRefused, match=r"^torch.Missing.__init__ not found$"):
        require_parameters(getattr(torch, "Missing", None), "__init__", ("self",), where="torch.Missing.__init__")


def test_nested_code_walks_every_code_object_inside_a_function_depth_first() -> None:
    from torchfix_core.probes import nested_code

    def outer() -> object:
        def inner() -> object:
            return [x for x in range(3)]

        return lambda: inner

    names = [c.co_name for c in nested_code(outer.__code__)]
    assert names[0] == "outer" and "inner" in names and "<lambda>" in names
    assert [c.co_name for c in nested_code(outer.__code__, include_self=False)] == names[1:]
    assert all(c is not outer.__code__ for c in nested_code(outer.__code__, include_self=False))


def test_imported_module_returns_an_imported_module_and_refuses_one_that_is_not() -> None:
    import sys

    import pytest
    from torchfix_core.patching import PatchRefused
    from torchfix_core.probes import imported_module

    assert imported_module("sys") is sys
    with pytest.raises(PatchRefused, match="torchfix_no_such_module is not imported"):
        imported_module("torchfix_no_such_module")
