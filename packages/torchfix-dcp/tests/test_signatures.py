"""dcp-fqn-orig-mod's signatures and report counts, from real runs.

The red run of ``keys`` (the fix off: a strict ``set_model_state_dict`` of the AC(compile) model's
state dict into the plain model) raises ``Error(s) in loading state_dict ... Unexpected key(s) ...
layers.0._orig_mod...``; the red ``dcp.load`` the other way round (a checkpoint with canonical keys,
written with the fix on, loaded into the AC(compile) model's state dict with the fix off) raises
``Missing key in checkpoint state_dict: layers.0._orig_mod...``. Each is fed to ``torchfix-doctor
explain``, which must name the fix ``not-installed`` (only the core and the family catalog
importable) and ``disabled`` (the fix off). Ordinary missing keys (no ``_orig_mod``, or a whole
compiled model's leading ``_orig_mod.``) are not claimed.
"""

from __future__ import annotations

from pathlib import Path

from _util import FIX, run
from torchfix_core.testing import assert_explained_both_ways, explain_json, failure_text, only_fix


def _claimed(text: str) -> bool:
    return FIX in {m["id"] for m in explain_json(text, isolated=True)["matches"]}


def test_strict_load_into_the_plain_model_is_explained() -> None:
    r = run("keys", "ac-compile", on=False)
    assert not r["ok"], r
    text = failure_text(r)
    print(text)
    match = assert_explained_both_ways(text, FIX, off=only_fix(FIX, False))
    assert "checkpoint_wrapper(torch.compile(block))" in match["signature"]["when"], match


def test_dcp_load_of_canonical_keys_into_the_ac_compile_model_is_explained(tmp_path: Path) -> None:
    assert run("save", str(tmp_path), on=True)["prefixed"] == []
    r = run("load", str(tmp_path), on=False)
    dcp_failure = r["dcp_failure"]
    assert "Missing key in checkpoint state_dict: model.layers.0._orig_mod." in dcp_failure["error"], r
    assert_explained_both_ways(failure_text(dcp_failure), FIX, off=only_fix(FIX, False))
    # the same checkpoint's torch.save'd dicts through set_model_state_dict: the AC(compile) model's
    # real keys (_checkpoint_wrapped_module._orig_mod) are missing
    assert "_checkpoint_wrapped_module._orig_mod." in r["error"], r
    assert_explained_both_ways(failure_text(r), FIX, off=only_fix(FIX, False))


def test_ordinary_missing_keys_are_not_claimed() -> None:
    ordinary = [
        'RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.weight". \n'
        '\tUnexpected key(s) in state_dict: "head.weight". ',
        'RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.weight". \n'
        '\tUnexpected key(s) in state_dict: "_orig_mod.fc.weight". ',
        "RuntimeError: Missing key in checkpoint state_dict: layers.0.lin.weight.",
        "RuntimeError: Missing key in checkpoint state_dict: _orig_mod.layers.0.lin.weight.",
    ]
    for text in ordinary:
        assert not _claimed("Traceback (most recent call last):\n" + text), text


def test_green_run_counts_and_disabled_run_counts_nothing() -> None:
    off, on = run("keys", "ac-compile", on=False), run("keys", "ac-compile", on=True)
    assert off["report"]["state"] == "disabled" and off["report"]["acted"] == 0, off
    assert on["report"]["state"] == "applied" and on["report"]["events"]["fqn-compiler-prefix-dropped"] > 0, on
