"""What the fix changes, on the CPU: Inductor's random codegen inside a 1-D CUDA Triton kernel context.

``_scenarios.py codegen`` builds the handlers Inductor's codegen reads (a ``TritonKernel`` whose
tensors are 1-D or 2-D, a graph on a CUDA device) without a GPU and asks ``TritonOverrides`` what it
emits. Without the fix torch 2.13 and 2.14 emit ``triton_helpers.rand4x`` in the 1-D kernel (the
bug's path; red); with it, ``tl.rand`` as torch 2.12 and 2.15 do, unless ``TORCHINDUCTOR_USE_RAND4X=1``
(upstream's own opt-in); the compile caches' key term names the codegen in effect; a revert gives
torch's own gate back. Where this torch has no 4x path (2.12) or upstream's gate (2.15), or no Triton,
the fix is ``not-needed`` and changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

TL_RAND = "tl.rand(seed, (offset).to(tl.uint32))"
TL_RANDN = "tl.randn(seed, (offset).to(tl.uint32))"
RAND4X = "triton_helpers.rand4x(seed, (offset).to(tl.uint32), XBLOCK)"
RANDN4X = "triton_helpers.randn4x(seed, (offset).to(tl.uint32), XBLOCK)"
FIX = "inductor-rand4x-dropout"


def test_rand4x_in_one_d_cuda_kernel_without_fix(codegen_without: dict[str, Any], bug_present: bool) -> None:
    assert codegen_without["state"] == "disabled", codegen_without
    assert codegen_without["key_terms"] == {"fx": None, "aot": None}, codegen_without
    if not bug_present:
        assert "rand4x" not in codegen_without["one_d"]["rand"] or codegen_without["triton"] is None
        return
    assert codegen_without["one_d"] == {"gate": True, "rand": RAND4X, "randn": RANDN4X}, codegen_without
    # the recompute's kind of kernel (2-D) draws per element: the forward and the recompute disagree
    assert codegen_without["two_d"] == {"gate": False, "rand": TL_RAND, "randn": TL_RANDN}, codegen_without


def test_tl_rand_in_one_d_cuda_kernel_with_fix(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert codegen_with["state"] == "not-needed", codegen_with
        assert codegen_with["key_terms"] == {"fx": None, "aot": None} and not codegen_with["patched"], codegen_with
        return
    assert codegen_with["states"] == {"import torch": "pending", "after trigger": "applied"}, codegen_with
    assert codegen_with["one_d"] == {"gate": False, "rand": TL_RAND, "randn": TL_RANDN}, codegen_with
    assert codegen_with["two_d"] == {"gate": False, "rand": TL_RAND, "randn": TL_RANDN}, codegen_with


def test_upstream_opt_in_restores_rand4x_with_fix(codegen_with: dict[str, Any], bug_present: bool) -> None:
    """``TORCHINDUCTOR_USE_RAND4X=1``, torch 2.15's switch, gives the 4x path back (the original decides)."""
    if not bug_present:
        pytest.skip("the fix does not act on this torch")
    assert codegen_with["one_d_opted_in"] == {"gate": True, "rand": RAND4X, "randn": RANDN4X}, codegen_with


def test_key_term_names_the_codegen_in_effect(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("the fix does not act on this torch: no key term")
    # the FX graph key's details and AOTAutograd's (its subclass) both carry it
    assert codegen_with["key_terms"] == {"fx": {FIX: "rand4x off"}, "aot": {FIX: "rand4x off"}}, codegen_with
    opted = {FIX: "rand4x opted in (TORCHINDUCTOR_USE_RAND4X=1)"}
    assert codegen_with["key_terms_opted_in"] == {"fx": opted, "aot": opted}, codegen_with


def test_revert_gives_torchs_gate_back(codegen_with: dict[str, Any], bug_present: bool) -> None:
    assert codegen_with["restored_is_torchs"] is True, codegen_with
    if not bug_present:
        return
    assert codegen_with["patched"] is True, codegen_with
    assert codegen_with["one_d_reverted"] == {"gate": True, "rand": RAND4X, "randn": RANDN4X}, codegen_with


def test_counts_declines_and_keys(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert codegen_with["report"]["acted"] == 0, codegen_with["report"]
        return
    # the 1-D context's three calls that would have taken the 4x path (the gate, rand, randn), none in
    # 2-D or opted in; four key details (FX graph and AOTAutograd, unset and opted in)
    assert codegen_with["report"]["events"] == {"rand4x-declined": 3, "key-changed": 4}, codegen_with["report"]
