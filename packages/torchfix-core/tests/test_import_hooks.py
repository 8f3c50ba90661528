"""Post-import hooks: fire after the module is complete, exactly once, loader restored."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from torchfix_core import _import_hooks
from torchfix_core._import_hooks import when_imported
from torchfix_core.testing import waiting_hooks


@pytest.fixture
def fresh_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    counter = {"n": 0}

    def make(name: str, body: str = "VALUE = 42\n") -> str:
        counter["n"] += 1
        full = f"{name}_{counter['n']}"
        (tmp_path / f"{full}.py").write_text(body)
        return full

    monkeypatch.syspath_prepend(str(tmp_path))
    yield make


def test_hook_fires_after_exec_with_the_complete_module(fresh_module) -> None:
    name = fresh_module("tf_hook_target")
    seen = []
    when_imported(name, lambda m: seen.append(m.VALUE))
    assert seen == [] and name in waiting_hooks()
    module = importlib.import_module(name)
    assert seen == [42]
    assert name not in waiting_hooks()
    assert type(module.__loader__).__name__ != "_HookLoader"
    assert type(module.__spec__.loader).__name__ != "_HookLoader"
    importlib.reload(module)
    assert seen == [42]  # once


def test_hook_fires_at_once_for_an_imported_module() -> None:
    seen = []
    when_imported("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]


def test_hook_error_goes_to_on_error_and_the_import_succeeds(fresh_module) -> None:
    name = fresh_module("tf_hook_error")
    errors = []

    def boom(_m):
        raise ValueError("hook failed")

    when_imported(name, boom, errors.append)
    module = importlib.import_module(name)
    assert module.VALUE == 42
    assert [str(e) for e in errors] == ["hook failed"]


def test_cancel_drops_a_pending_hook(fresh_module) -> None:
    name = fresh_module("tf_hook_cancel")
    seen = []

    def callback(m):
        seen.append(m)

    when_imported(name, callback)
    _import_hooks.cancel(callback)
    importlib.import_module(name)
    assert seen == []


def test_failed_import_keeps_the_hook_pending(fresh_module) -> None:
    name = fresh_module("tf_hook_raises", "raise ImportError('module body failed')\n")
    seen = []

    def callback(m):
        seen.append(m)

    when_imported(name, callback)
    with pytest.raises(ImportError):
        importlib.import_module(name)
    assert seen == [] and name in waiting_hooks()
    sys.modules.pop(name, None)
    _import_hooks.cancel(callback)


def test_hook_waits_until_the_import_in_progress_has_finished(fresh_module) -> None:
    # outer imports the trigger half-way through its own body, like torch._dynamo importing
    # torch.distributed.tensor: the hook must not see a partially initialized outer module
    trigger = fresh_module("tf_hook_trigger")
    outer = fresh_module("tf_hook_outer", f"import {trigger}\nDEFINED_LATER = 'complete'\n")
    seen = []
    when_imported(trigger, lambda m: seen.append(getattr(sys.modules[outer], "DEFINED_LATER", "partial")))
    importlib.import_module(outer)
    assert seen == ["complete"]
    assert type(sys.modules[outer].__spec__).__name__ == "ModuleSpec"
    assert not hasattr(type(sys.modules[outer].__spec__), "_torchfix_watch")


def test_when_imported_on_a_module_still_initializing_waits_for_it(fresh_module) -> None:
    outer = fresh_module(
        "tf_hook_self",
        "import sys\nfrom torchfix_core._import_hooks import when_imported\n"
        "SEEN = []\nwhen_imported(__name__, lambda m: SEEN.append(getattr(m, 'LAST', 'partial')))\n"
        "LAST = 'complete'\n",
    )
    module = importlib.import_module(outer)
    assert module.SEEN == ["complete"]
