"""fp8-minmax-store on the CPU: what Inductor's Triton codegen emits for ``minimum``/``maximum``
without and with the fix, and the key term on the FX graph and AOTAutograd cache details.

The miscompile itself needs a GPU (``test_gpu.py``); what the fix changes is the Triton source
Inductor writes, which a CPU can read. Without the fix torch 2.14 emits
``tl.minimum(a, b, tl.PropagateNan.ALL)`` (the form Triton 3.8 mis-lowers next to transposed fp8
stores); with it, ``tl.where((a < b) | (a != a), a, b)``. The emitted expressions are also
evaluated with torch ops standing in for ``tl`` and compared with ``torch.minimum``/``maximum``
(which propagate NaN) on NaN, infinities and ordinary values.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch

WHERE_MIN = "tl.where((tmp0 < tmp1) | (tmp0 != tmp0), tmp0, tmp1)"
WHERE_MAX = "tl.where((tmp0 > tmp1) | (tmp0 != tmp0), tmp0, tmp1)"
#: the fix's compile-cache key term (torchfix-core's, fix id -> detail): the codegen in effect
KEY_TERM = {"fp8-minmax-store": "tl.where((a < b) | (a != a), a, b) / tl.where((a > b) | (a != a), a, b)"}


def _values() -> tuple[torch.Tensor, torch.Tensor]:
    special = [math.nan, math.inf, -math.inf, 0.0, 1.5, -2.0, 448.0, -448.0]
    pairs = [(x, y) for x in special for y in special]
    return torch.tensor([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs])


def _evaluate(source: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``source`` (Triton ``tl.where`` / comparison syntax) evaluated with torch ops for ``tl``."""
    tl = SimpleNamespace(where=torch.where)
    return eval(source, {"tl": tl}, {"tmp0": a, "tmp1": b})  # noqa: S307 - the fix's own two expressions


def test_propagate_nan_codegen_fails_without_fix(codegen_without: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip(f"this torch emits {codegen_without['minimum']}: no PropagateNan min/max to replace")
    assert "tl.PropagateNan.ALL" in codegen_without["minimum"], codegen_without
    assert "tl.PropagateNan.ALL" in codegen_without["maximum"], codegen_without
    assert codegen_without["fx_key_term"] is None and codegen_without["aot_key_term"] is None
    assert codegen_without["state"] == "disabled"


def test_where_codegen_passes_with_fix(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert codegen_with["state"] == "not-needed", codegen_with
        assert "PropagateNan" not in codegen_with["minimum"] and codegen_with["fx_key_term"] is None
        return
    assert codegen_with["states"] == {"import torch": "pending", "after trigger": "applied"}, codegen_with
    assert codegen_with["minimum"] == WHERE_MIN and codegen_with["maximum"] == WHERE_MAX, codegen_with
    # an operand that is an expression, not a CSE'd name, is parenthesised
    assert codegen_with["minimum_expr"] == "tl.where((tmp0 < (tmp1 + 1)) | (tmp0 != tmp0), tmp0, (tmp1 + 1))"
    # the FX graph key's details and AOTAutograd's (its subclass) both carry the codegen in effect
    assert codegen_with["fx_key_term"] == KEY_TERM and codegen_with["aot_key_term"] == KEY_TERM, codegen_with


def test_where_form_propagates_nan_like_torch(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("the fix does not change this torch's codegen")
    a, b = _values()
    for source, reference in ((codegen_with["minimum"], torch.minimum), (codegen_with["maximum"], torch.maximum)):
        got, want = _evaluate(source, a, b), reference(a, b)
        assert torch.equal(got.isnan(), want.isnan()), (source, a, b, got, want)
        finite = ~want.isnan()
        assert torch.equal(got[finite], want[finite]), (source, got, want)


def test_counts_emissions_and_keys(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert codegen_with["report"]["acted"] == 0, codegen_with["report"]
        return
    # three codegen calls of the scenario, two key details (FX graph and AOTAutograd)
    assert codegen_with["report"]["events"] == {"where-min-max-emitted": 3, "key-changed": 2}, codegen_with["report"]
