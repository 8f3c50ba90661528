"""magi-aot-fallback on MagiCompiler's real source (``nox -s magi``; skipped where Magi is absent).

Each scenario runs in a fresh interpreter (``_magi_aot_driver.py``, no command-line arguments:
Magi's ``CompileConfig`` parses ``sys.argv``) with its own Magi cache directory. "Without torchfix"
is ``TORCHFIX_AUTOLOAD=0``; "with" is plain autoload (every installed fix active, the torch-level
``aot-fallback`` included), with magi-aot-fallback forced where the installed torch is outside its
validated range (so that the same file shows whether it works there).

Expectations come from live runs without torchfix (the ``without_fix`` fixture), never from version
strings: whether Magi's AOT path fails for a plain model on this torch (on torch 2.10 - 2.13 it does,
with the ``"self"`` closure ``ValueError``), and that a graph break reaches Magi as ``Unsupported``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import reproduce, state_to_expect

MAGI = importlib.util.find_spec("magi_compiler") is not None
pytestmark = pytest.mark.skipif(not MAGI, reason="magi_compiler is not installed (nox -s magi installs it)")
DRIVER = Path(__file__).with_name("_magi_aot_driver.py")
FIX_ID = "magi-aot-fallback"
SELF_CLOSURE = ("builtins.ValueError", "tuple.index(x): x not in tuple")  # Magi's aot_compile, torch >= 2.10
UNSUPPORTED = "torch._dynamo.exc.Unsupported"


def run(scenario: dict[str, Any], tmp_path: Path, **env: str) -> dict[str, Any]:
    cache = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    child = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "MAGI_COMPILE_"))}
    child.update(
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
        MAGI_COMPILE_CACHE_ROOT_DIR=str(cache / "magi"),
        TFTEST_MAGI_AOT=json.dumps(scenario),
        **env,
    )
    proc = subprocess.run([sys.executable, str(DRIVER)], env=child, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    report["stderr"] = proc.stderr
    return report


def with_fix(**env: str) -> dict[str, str]:
    """The environment of a "with torchfix" run: magi-aot-fallback forced where the installed torch is
    outside its validated range (an AOT failure aborts the call on every torch: the bug is present)."""
    if state_to_expect(FIX_ID, bug_present=True) == "out-of-range":
        env["TORCHFIX_FORCE"] = ",".join(filter(None, [env.get("TORCHFIX_FORCE"), FIX_ID]))
    return env


@pytest.fixture(scope="module")
def without_fix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Live runs without torchfix: a plain model and a graph-breaking one under Magi's AOT mode."""
    tmp = tmp_path_factory.mktemp("without-fix")
    return {model: run({"model": model}, tmp, TORCHFIX_AUTOLOAD="0") for model in ("plain", "graph_break")}


def aot_broken_here(without_fix: dict[str, dict[str, Any]]) -> bool:
    return not without_fix["plain"]["ok"]


def test_magi_aot_on_this_torch_without_fix(without_fix: dict[str, dict[str, Any]]) -> None:
    """Red where Magi's AOT path cannot work on this torch: every model, the plain one included, aborts
    with the ``"self"`` closure ``ValueError``; where it can, the plain model runs through AOT."""
    out = without_fix["plain"]
    if aot_broken_here(without_fix):
        assert (out["error_type"], out["error"]) == SELF_CLOSURE, out
    else:
        assert out["error"] is None and out["state_aot"] is True, out


def test_unsupported_model_reaches_magi_as_unsupported_without_fix(without_fix: dict[str, dict[str, Any]]) -> None:
    out = without_fix["graph_break"]
    assert not out["ok"] and out["error_type"] == UNSUPPORTED, out


def test_magi_aot_falls_back_to_jit_per_state_with_fix(tmp_path: Path, without_fix: dict[str, dict[str, Any]]) -> None:
    out = run({"model": "plain", "second_model": True}, tmp_path, **with_fix())
    assert out["states"][FIX_ID] == "applied", out["reasons"]
    assert out["ok"] and out["other_ok"], out
    assert out["torch_fallbacks"] == []
    if not aot_broken_here(without_fix):  # AOT works here: nothing to fall back from, both states keep AOT
        assert out["magi_fallbacks"] == [] and out["state_aot"] is True and out["other_state_aot"] is True, out
        return
    assert out["state_aot"] is False and out["state_jit_code"], out  # AOT off on that state, JIT bytecode captured
    # the second model's state tried AOT on its own: one decision per compile state
    assert len(out["magi_fallbacks"]) == 2, out["magi_fallbacks"]
    assert "'self' closure variable" in out["magi_fallbacks"][0]
    assert out["stderr"].count("torchfix magi-aot-fallback: MagiCompiler AOT compile of") == 2  # one per state
    assert "Magi AOT->JIT fallbacks in this process: 2" in out["reasons"][FIX_ID]  # doctor note


def test_torch_level_fix_alone_turns_unsupported_into_valueerror_inside_magi(tmp_path: Path) -> None:
    """The interplay bug: the torch-level wrapper hands Magi a JITFallback, whose
    save_compiled_function has no 'self' closure variable. Where the torch-level fix is outside its
    own validated range it is inactive, and Magi sees the Unsupported unchanged."""
    out = run({"model": "graph_break"}, tmp_path, TORCHFIX_DISABLE=FIX_ID)
    torch_level = state_to_expect("aot-fallback", bug_present=True)  # torch's aot_compile has no fallback
    assert out["states"]["aot-fallback"] == torch_level, out["reasons"]
    if torch_level == "applied":
        assert (out["error_type"], out["error"]) == SELF_CLOSURE, out
        assert len(out["torch_fallbacks"]) == 1
    else:
        assert out["error_type"] == UNSUPPORTED and out["torch_fallbacks"] == [], out


def test_both_fixes_decide_once_at_the_magi_level(tmp_path: Path) -> None:
    out = run({"model": "graph_break"}, tmp_path, **with_fix())
    assert out["torch_fallbacks"] == [], out  # the torch-level wrapper passed through
    assert len(out["magi_fallbacks"]) == 1 and "Unsupported" in out["magi_fallbacks"][0], out
    # Magi's JIT path is fullgraph too: the graph break is reported there, as Magi itself would
    assert out["error_type"] == UNSUPPORTED and out["state_aot"] is False, out


@pytest.mark.parametrize(
    ("scenario", "error_type"),
    [
        ({"inject": "assertion"}, "builtins.AssertionError"),
        ({"inject": "oom"}, "torch.OutOfMemoryError"),
        ({"inject": "interrupt"}, "builtins.KeyboardInterrupt"),
        ({"model": "user_error"}, UNSUPPORTED),  # ObservedException from the model
        ({"model": "graph_break", "assert_cache_hit": True}, UNSUPPORTED),
    ],
    ids=["assertion", "oom", "keyboard-interrupt", "user-error", "assert-cache-hit"],
)
def test_policy_never_falls_back_for(scenario: dict[str, Any], error_type: str, tmp_path: Path) -> None:
    out = run(scenario, tmp_path, **with_fix())
    assert out["states"][FIX_ID] == "applied", out["reasons"]
    assert out["error_type"] == error_type, out
    assert out["magi_fallbacks"] == [] and out["torch_fallbacks"] == [], out
    assert out["state_aot"] is True, out  # the state keeps AOT: nothing was switched


def test_strict_mode_propagates_the_original_error(tmp_path: Path, without_fix: dict[str, dict[str, Any]]) -> None:
    """Strict mode: exactly what Magi does without torchfix (the model that fails here without it)."""
    model = "plain" if aot_broken_here(without_fix) else "graph_break"
    out = run({"model": model}, tmp_path, **with_fix(TORCHFIX_AOT_FALLBACK_STRICT="1"))
    assert out["states"][FIX_ID] == "applied", out["reasons"]
    expected = without_fix[model]
    assert (out["error_type"], out["error"]) == (expected["error_type"], expected["error"]), out
    assert out["magi_fallbacks"] == [] and out["torch_fallbacks"] == [], out


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(
    without_fix: dict[str, dict[str, Any]],
) -> None:
    """The spec's reproduction (the driver's ``plain`` scenario, shipped in
    ``torchfix_aot_fallback.reproduction``), run as ``verify`` runs it (every other fix off, the
    torch-level ``aot-fallback`` included): where Magi's AOT path cannot work on this torch, the
    ``"self"`` closure ``ValueError`` without the fix and a JIT run equal to eager with it; where it
    can, no bug either way."""
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True, env=with_fix())
    assert off["state"] == "disabled", off
    assert on["state"] == "applied", on
    assert on["outcome"]["result"] == "not-observed", on
    if aot_broken_here(without_fix):
        assert off["outcome"]["result"] == "observed", off
        assert off["outcome"]["measure"].startswith("ValueError: tuple.index(x): x not in tuple"), off
        assert "'self' closure variable" in on["outcome"]["measure"] and "ran on JIT" in on["outcome"]["measure"], on
    else:
        assert off["outcome"]["result"] == "not-observed", off
        assert "Magi's AOT path compiled and ran the model" in on["outcome"]["measure"], on
