"""The generic probe helpers (torchfix_core.probes), on the installed (real) torch."""

from __future__ import annotations

import torch
from torchfix_core.probes import counting_mode, isolated


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
