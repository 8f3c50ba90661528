"""mix-order-view-write on the CPU: the wrapper lines the release's mix-order reduction writes for an
output that is a view (``NonOwningLayout``), without and with the fix, run on tensors; and the key
term on the FX graph and AOTAutograd cache details.

The fused kernel needs a GPU (``test_gpu.py``); the bug is in the Python wrapper line written after
it, which the live ``SIMDScheduling._codegen_mix_order_reduction`` writes on a CPU too when its
kernel-building steps are stood in for (``_emit.py``). Without the fix, torch 2.11-2.14 write
``buf3 = ws_0[...].sum(dim=0)...`` for the view ``buf3``: run on tensors, the viewed region keeps the
NaN it was filled with (never written). With the fix they write the alias and
``buf3.copy_(ws_0[...].sum(dim=0)...)`` (no ``.to(dtype)``: ``copy_`` casts), the region holds the
reduction, and the plain output keeps the release's line; torch 2.15.0 writes the same lines itself.
"""

from __future__ import annotations

from typing import Any

import pytest

#: the fix's compile-cache key term (torchfix-core's, fix id -> detail)
KEY_TERM = {
    "mix-order-view-write": "mix-order reduction outputs with a NonOwningLayout written with copy_ (pytorch PR #193103)"
}
ALIAS = "buf3 = buf_big[8 : 16]  # alias"


def _view_lines(r: dict[str, Any], dtype: str) -> list[str]:
    return [line for line in r["lines"][dtype] if line.startswith("buf3")]


def test_view_output_never_written_without_fix(emit_without: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip(f"this torch writes {_view_lines(emit_without, 'float32')}: no rebinding of a view")
    for dtype in ("float32", "bfloat16"):
        (line,) = _view_lines(emit_without, dtype)
        assert line.startswith("buf3 = ws_0[") and ".sum(dim=0" in line, line
        run = emit_without["runs"][dtype]
        # the viewed region keeps what it held (NaN here): the reduction went to a fresh tensor
        assert run["view_written"] is False and run["view_nonfinite"] == 8, run
        assert run["plain_written"] is True, run
    assert emit_without["fx_key_term"] is None and emit_without["aot_key_term"] is None
    assert emit_without["state"] == "disabled"


def test_view_output_written_with_fix(emit_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert emit_with["state"] == "not-needed", emit_with
        assert emit_with["fx_key_term"] is None, emit_with
        return
    assert emit_with["states"] == {"import torch": "pending", "after trigger": "applied"}, emit_with
    for dtype in ("float32", "bfloat16"):
        alias, copy = _view_lines(emit_with, dtype)
        assert alias == ALIAS, emit_with["lines"]
        assert copy.startswith("buf3.copy_(ws_0[") and copy.endswith(")") and ".to(" not in copy, copy
        run = emit_with["runs"][dtype]
        assert run["view_written"] is True and run["view_nonfinite"] == 0, run
        assert run["plain_written"] is True and run["plain_dtype"] == f"torch.{dtype}", run
    (plain,) = [line for line in emit_with["lines"]["bfloat16"] if line.startswith("buf5")]
    assert plain.startswith("buf5 = ws_0[") and plain.endswith(".to(torch.bfloat16)"), plain
    # the FX graph key's details and AOTAutograd's (its subclass) both carry the term
    assert emit_with["fx_key_term"] == KEY_TERM and emit_with["aot_key_term"] == KEY_TERM, emit_with


def test_fixed_lines_match_upstream_form(emit_with: dict[str, Any], emit_without: dict[str, Any]) -> None:
    """Where torch carries upstream's fix (2.15.0) its own lines are the alias and ``copy_``: the form
    the fix writes on 2.11-2.14 (the expression inside ``copy_`` is each release's own)."""
    checked = 0
    for r in (emit_with, emit_without):
        if _view_lines(r, "float32")[0].startswith("buf3 = ws_0["):
            continue  # the release's rebinding line (the bug): test_view_output_never_written_without_fix
        for dtype in ("float32", "bfloat16"):
            alias, copy = _view_lines(r, dtype)
            assert alias == ALIAS and copy.startswith("buf3.copy_(ws_0["), r["lines"]
            assert r["runs"][dtype]["view_written"] is True, r["runs"]
        checked += 1
    if not checked:
        pytest.skip("neither this torch nor the fix writes through the view here (the fix not applied)")


def test_counts_views_written_and_keys(emit_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert emit_with["report"]["acted"] == 0, emit_with["report"]
        return
    # one view output per emit call (float32, bfloat16), two key details (FX graph and AOTAutograd)
    assert emit_with["report"]["events"] == {"view-written": 2, "key-changed": 2}, emit_with["report"]
