"""dcp-fqn-orig-mod (pytorch/torchtitan#2622) on the CPU: red without the fix, green with it, and the
cases where it must stay out of the way. Every run is a fresh interpreter (``_scenarios.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _util import FIX, run
from torchfix_core.testing import reproduce

PLAIN_KEYS = ["layers.0.lin.bias", "layers.0.lin.weight", "layers.1.lin.bias", "layers.1.lin.weight"]


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it() -> None:
    off, on = reproduce(FIX, False), reproduce(FIX, True, with_report=True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    assert off["outcome"]["measure"].startswith("4 of 4 keys carry _orig_mod"), off
    assert "misses 4 keys; strict=False leaves 4 of 4 tensors unloaded" in off["outcome"]["measure"], off
    assert on["outcome"]["result"] == "not-observed" and on["state"] == "applied", on
    assert on["report"]["events"]["fqn-compiler-prefix-dropped"] > 0, on


def test_model_and_optimizer_keys_carry_orig_mod_without_fix() -> None:
    r = run("keys", "ac-compile", on=False)
    assert r["model_keys"] == sorted(
        k.replace("layers.0.", "layers.0._orig_mod.").replace("layers.1.", "layers.1._orig_mod.") for k in PLAIN_KEYS
    )
    assert r["optim_keys"] == r["model_keys"], r
    assert not r["ok"] and "Missing key(s) in state_dict" in r["error"], r


def test_model_and_optimizer_keys_are_the_plain_models_with_fix() -> None:
    r = run("keys", "ac-compile", on=True)
    assert r["ok"] and r["model_keys"] == PLAIN_KEYS and r["optim_keys"] == PLAIN_KEYS and r["prefixed"] == [], r
    assert r["report"]["state"] == "applied" and r["report"]["events"]["fqn-compiler-prefix-dropped"] > 0, r


@pytest.mark.parametrize("order", ["compile-ac", "compile", "plain"])
def test_other_wrappings_are_clean_and_untouched(order: str) -> None:
    """compile(AC(block)), compile(block) and the plain model already give the plain keys: the fix
    is applied and changes nothing there."""
    r = run("keys", order, on=True)
    assert r["ok"] and r["model_keys"] == PLAIN_KEYS and r["optim_keys"] == PLAIN_KEYS, r
    assert r["report"]["acted"] == 0, r


def test_checkpoint_written_without_fix_loads_with_it(tmp_path: Path) -> None:
    """An old checkpoint (``_orig_mod`` keys, written by unpatched torch) loads with the fix on:
    ``dcp.load`` of the DCP directory into the canonical keys of the same AC(compile) model and
    Adam, and ``set_model_state_dict`` / ``set_optimizer_state_dict`` of its ``torch.save``'d dicts."""
    saved = run("save", str(tmp_path), on=False)
    assert saved["prefixed"] == saved["model_keys"] != [], saved
    r = run("load", str(tmp_path), on=True)
    assert r["ok"], r.get("traceback")
    assert r["requested_keys"] == PLAIN_KEYS, r
    assert r["dcp"] == {"weights": True, "adam": True} and r["in_memory"] == {"weights": True, "adam": True}, r
    events = r["report"]["events"]
    assert events["old-checkpoint-key-read"] > 0 and events["old-key-renamed-on-load"] > 0, r


def test_checkpoint_written_with_fix_loads_into_the_plain_model(tmp_path: Path) -> None:
    assert run("save", str(tmp_path), on=True)["prefixed"] == []
    r = run("plain", str(tmp_path), on=False)
    assert r["ok"], r.get("traceback")


def test_checkpoint_written_without_fix_misses_keys_in_the_plain_model(tmp_path: Path) -> None:
    """torchtitan#2622's failure: the AC(compile) checkpoint into the plain model's state dict."""
    run("save", str(tmp_path), on=False)
    r = run("plain", str(tmp_path), on=False)
    assert not r["ok"] and "Missing key in checkpoint state_dict: model.layers.0.lin" in r["error"], r


@pytest.mark.parametrize("on", [False, True], ids=["without-fix", "with-fix"])
def test_fully_shard_two_ranks(on: bool) -> None:
    """2 spawned gloo ranks, FSDP2 ``fully_shard`` on the AC(compile) blocks and the model:
    ``dcp.save`` of ``get_model_state_dict``, ``dcp.load`` into a plain ``fully_shard``-ed model."""
    r = run("ranks", "2", on=on)
    if on:
        assert r["ok"] and r["restored"] and r["keys"] == PLAIN_KEYS, r.get("traceback") or r
    else:
        assert not r["ok"] and "Missing key in checkpoint state_dict: layers.0.lin" in r["error"], r
        assert all("_orig_mod" in k for k in r["keys"]), r


def test_a_users_attribute_named_orig_mod_is_kept() -> None:
    """Only ``_orig_mod`` segments that are the compiler prefix of an ``OptimizedModule`` behind the
    activation wrapper go; a user's module attribute of that name stays, wrapped or not."""
    r = run("user", "-", on=True)
    assert r["ok"], r.get("traceback")
    assert r["model_keys"] == [
        "compiled._orig_mod.bias",  # the user's _orig_mod of the compiled Holder; the compiler's is gone
        "compiled._orig_mod.weight",
        "mine._orig_mod.bias",
        "mine._orig_mod.weight",
        "wrapped._orig_mod.bias",
        "wrapped._orig_mod.weight",
    ], r


@pytest.mark.parametrize("order", ["plain", "compile-ac"])
def test_checkpoint_written_without_fix_loads_into_another_wrapping_with_it(tmp_path: Path, order: str) -> None:
    """torchtitan#2622's training -> inference reload: an old AC(compile) checkpoint (``_orig_mod``
    keys, written by unpatched torch) into the plain model or compile(AC(block)), whose keys never
    had the prefix. ``dcp.load`` of the DCP directory and ``set_model_state_dict`` (strict) /
    ``set_optimizer_state_dict`` of the ``torch.save``'d dicts: red without the fix, green with it."""
    saved = run("save", str(tmp_path), on=False)
    assert saved["prefixed"] == saved["model_keys"] != [], saved
    off = run("load", str(tmp_path), order, on=False)
    assert off["dcp"] is None and off["in_memory"] is None, off
    assert "Missing key in checkpoint state_dict: model.layers.0.lin" in off["dcp_failure"]["error"], off
    assert "layers.0.lin.weight" in off["in_memory_failure"]["error"], off
    on = run("load", str(tmp_path), order, on=True)
    assert on["ok"], on.get("traceback")
    assert on["requested_keys"] == PLAIN_KEYS, on
    assert on["dcp"] == {"weights": True, "adam": True} and on["in_memory"] == {"weights": True, "adam": True}, on
    events = on["report"]["events"]
    assert events["old-checkpoint-key-read"] > 0 and events["old-key-renamed-on-load"] > 0, on
    assert events["fqn-compiler-prefix-dropped"] == 0, on  # nothing of this model was renamed


def test_two_orig_mod_spellings_of_a_key_stay_as_torch_has_them(tmp_path: Path) -> None:
    """A missing key that two checkpoint keys equal once their ``_orig_mod`` segments go
    (``a._orig_mod.w``, ``_orig_mod.a.w``) stays missing, noted; a key torch finds (``b.w``) is read
    as it is, not from its ``_orig_mod`` spelling next to it. Same with the fix off."""
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on = run("ambiguous", str(tmp_path / "on"), on=True)
    off = run("ambiguous", str(tmp_path / "off"), on=False)
    for r in (on, off):
        assert r["ok"], r.get("traceback")
        assert "Missing key in checkpoint state_dict: a.w." in r["dcp_a"], r
        assert r["dcp_b"] == [3.0, 3.0], r
        assert 'Missing key(s) in state_dict: "a.w"' in r["set_strict"], r
        assert r["set_loose"] == {"a": [0.0, 0.0], "b": [3.0, 3.0]}, r
        assert r["unexpected"] == ["_orig_mod.a.w", "a._orig_mod.w", "b._orig_mod.w"], r
    events = on["report"]["events"]
    assert events["old-key-ambiguous"] == 3 and events["old-checkpoint-key-read"] == 0, on
    assert events["old-key-renamed-on-load"] == 0, on
