"""Subprocess runner shared by the tests: each scenario runs in a fresh interpreter so that
"without the fix" (TORCHFIX_DISABLE=aot-fallback) and "with the fix" see real, unpatched torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import torch
from torchfix_core.testing import clean_environ

_MINOR = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
#: aot_eager is serializable on 2.12+; on 2.11 its AOT compile raises AssertionError("expected OutputCode").
BACKEND = "aot_eager" if _MINOR >= (2, 12) else "inductor"
#: torch versions inside the fix's validated range (the probe decides there).
IN_RANGE = (2, 11) <= _MINOR < (2, 16)

PRELUDE = f"""
import json, os, sys, logging
import torch, torch._dynamo
torch._dynamo.config.enable_aot_compile = True
BACKEND = {BACKEND!r}
def emit(**kw):
    print("RESULT " + json.dumps(kw))
def fix_state():
    import torchfix_core
    return next((r.state, r.reason) for r in torchfix_core.status() if r.id == "aot-fallback")
"""


def run(
    code: str, tmp_path: Any, *, disable: bool = False, env: dict[str, str] | None = None, timeout: float = 300
) -> dict[str, Any]:
    """Run ``PRELUDE + code``; returns the last ``emit(...)`` dict plus ``rc`` and ``stderr``."""
    child = clean_environ(
        {
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
            "PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
    )
    if disable:
        child["TORCHFIX_DISABLE"] = "aot-fallback"
    child.update(env or {})
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(code))
    proc = subprocess.run(
        [sys.executable, str(script)], env=child, capture_output=True, text=True, timeout=timeout, cwd=str(tmp_path)
    )
    result: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    result["rc"] = proc.returncode
    result["stderr"] = proc.stderr
    return result


MODELS = """
import torch

def graph_break(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos() * 2

def plain(x):
    # sin(x) + 2 stays in [1, 3], where Inductor's vectorised sin and eager's agree within
    # allclose's default rtol; sin(x) + 1 nears 0 at x = -pi/2, where a 1-ulp difference (~6e-8)
    # exceeds atol 1e-8 and random inputs made the comparisons flaky (seen once on torch 2.11)
    return x.sin() + 2
"""


def write_models(tmp_path: Any, extra: str = "") -> None:
    (tmp_path / "aotfb_models.py").write_text(MODELS + extra)


def run_with_models(code: str, tmp_path: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`write_models` into ``tmp_path``, then :func:`run` ``code`` there (same keywords)."""
    write_models(tmp_path)
    return run(code, tmp_path, **kwargs)
