"""magi-aot-fallback on MagiCompiler's real source (``nox -s magi``; skipped where Magi is absent).

Each scenario runs in a fresh interpreter (``_magi_aot_driver.py``, no command-line arguments:
Magi's ``CompileConfig`` parses ``sys.argv``) with its own Magi cache directory. "Without torchfix"
is ``TORCHFIX_AUTOLOAD=0``; "with" is plain autoload (every installed fix active, the torch-level
``aot-fallback`` included).
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

MAGI = importlib.util.find_spec("magi_compiler") is not None
pytestmark = pytest.mark.skipif(not MAGI, reason="magi_compiler is not installed (nox -s magi installs it)")
DRIVER = Path(__file__).with_name("_magi_aot_driver.py")


def run(scenario: dict[str, Any], tmp_path: Path, **env: str) -> dict[str, Any]:
    child = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "MAGI_COMPILE_"))}
    child.update(
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        MAGI_COMPILE_CACHE_ROOT_DIR=str(tmp_path / "magi"),
        TFTEST_MAGI_AOT=json.dumps(scenario),
        **env,
    )
    proc = subprocess.run([sys.executable, str(DRIVER)], env=child, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    report["stderr"] = proc.stderr
    return report


def test_magi_aot_on_this_torch_fails_without_fix(tmp_path: Path) -> None:
    out = run({"model": "plain"}, tmp_path, TORCHFIX_AUTOLOAD="0")
    assert not out["ok"]
    assert (out["error_type"], out["error"]) == ("builtins.ValueError", "tuple.index(x): x not in tuple"), out


def test_magi_aot_falls_back_to_jit_per_state_with_fix(tmp_path: Path) -> None:
    out = run({"model": "plain", "second_model": True}, tmp_path)
    assert out["states"]["magi-aot-fallback"] == "applied", out["reasons"]
    assert out["ok"] and out["other_ok"], out
    assert out["state_aot"] is False and out["state_jit_code"], out  # AOT off on that state, JIT bytecode captured
    # the second model's state tried AOT on its own: one decision per compile state
    assert len(out["magi_fallbacks"]) == 2, out["magi_fallbacks"]
    assert "'self' closure variable" in out["magi_fallbacks"][0]
    assert out["torch_fallbacks"] == []
    assert out["stderr"].count("torchfix magi-aot-fallback: MagiCompiler AOT compile of") == 2  # one per state
    assert "Magi AOT->JIT fallbacks in this process: 2" in out["reasons"]["magi-aot-fallback"]  # doctor note


def test_unsupported_model_reaches_magi_as_unsupported_without_fix(tmp_path: Path) -> None:
    out = run({"model": "graph_break"}, tmp_path, TORCHFIX_AUTOLOAD="0")
    assert out["error_type"] == "torch._dynamo.exc.Unsupported", out


def test_torch_level_fix_alone_turns_unsupported_into_valueerror_inside_magi(tmp_path: Path) -> None:
    """The interplay bug: the torch-level wrapper hands Magi a JITFallback, whose
    save_compiled_function has no 'self' closure variable."""
    out = run({"model": "graph_break"}, tmp_path, TORCHFIX_DISABLE="magi-aot-fallback")
    assert out["error_type"] == "builtins.ValueError", out
    assert len(out["torch_fallbacks"]) == 1


def test_both_fixes_decide_once_at_the_magi_level(tmp_path: Path) -> None:
    out = run({"model": "graph_break"}, tmp_path)
    assert out["torch_fallbacks"] == [], out  # the torch-level wrapper passed through
    assert len(out["magi_fallbacks"]) == 1 and "Unsupported" in out["magi_fallbacks"][0], out
    # Magi's JIT path is fullgraph too: the graph break is reported there, as Magi itself would
    assert out["error_type"] == "torch._dynamo.exc.Unsupported" and out["state_aot"] is False, out


@pytest.mark.parametrize(
    ("scenario", "error_type"),
    [
        ({"inject": "assertion"}, "builtins.AssertionError"),
        ({"inject": "oom"}, "torch.OutOfMemoryError"),
        ({"inject": "interrupt"}, "builtins.KeyboardInterrupt"),
        ({"model": "user_error"}, "torch._dynamo.exc.Unsupported"),  # ObservedException from the model
        ({"model": "graph_break", "assert_cache_hit": True}, "torch._dynamo.exc.Unsupported"),
    ],
    ids=["assertion", "oom", "keyboard-interrupt", "user-error", "assert-cache-hit"],
)
def test_policy_never_falls_back_for(scenario: dict[str, Any], error_type: str, tmp_path: Path) -> None:
    out = run(scenario, tmp_path)
    assert out["error_type"] == error_type, out
    assert out["magi_fallbacks"] == [] and out["torch_fallbacks"] == [], out
    assert out["state_aot"] is True, out  # the state keeps AOT: nothing was switched


def test_strict_mode_propagates_the_original_error(tmp_path: Path) -> None:
    out = run({"model": "plain"}, tmp_path, TORCHFIX_AOT_FALLBACK_STRICT="1")
    assert out["error_type"] == "builtins.ValueError" and out["magi_fallbacks"] == [], out
