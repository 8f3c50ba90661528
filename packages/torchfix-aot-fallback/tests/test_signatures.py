"""The signatures of aot-fallback and magi-aot-fallback match the errors their red runs raise, and
the report counts each fallback.

aot-fallback: one scenario script runs the three AOT failures the fix answers (a graph break under
``.aot_compile``, a backend result AOT cannot serialize, an artifact called with inputs its guards
reject), each in the same fresh interpreter; the red run (the fix off) keeps each error's real
traceback, which ``torchfix-doctor explain`` must name as aot-fallback (``not-installed`` where
only the core and the family catalog exist, ``disabled`` here with the fix off). The green run (the fix alone on) must
count three fallbacks; the red run none.

magi-aot-fallback (needs ``magi_compiler``): the same for Magi's AOT mode, through the driver of
test_magi_aot_fallback.py (``_magi_aot_driver.py``): the plain model (the ``"self"`` closure
``ValueError`` on torch 2.10-2.13) and the graph-breaking model (``Unsupported`` from Magi's AOT
step).
"""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _helpers import IN_RANGE, PRELUDE, write_models
from torchfix_core.testing import (
    assert_explained_both_ways,
    failure_text,
    only_fix,
    run_json_script,
    state_to_expect,
)

FIX_ID = "aot-fallback"
MAGI_ID = "magi-aot-fallback"
MAGI = importlib.util.find_spec("magi_compiler") is not None
DRIVER = Path(__file__).with_name("_magi_aot_driver.py")

SCENARIO = """
import traceback
from torchfix_core.testing import report_of
from aotfb_models import graph_break, plain
x = torch.randn(16)
out = {}
def attempt(name, call):
    try:
        call()
        out[name] = {"error": None}
    except Exception as e:
        out[name] = {"error_type": f"{type(e).__module__}.{type(e).__qualname__}", "error": str(e),
                     "traceback": traceback.format_exc()}
def not_serializable(gm, example_inputs):
    return gm.forward  # a bound method: AOT cannot save it
attempt("graph-break", lambda: torch.compile(graph_break, fullgraph=True, backend=BACKEND).aot_compile(((x,), {}))(x))
attempt("not-serializable",
        lambda: torch.compile(plain, fullgraph=True, backend=not_serializable).aot_compile(((x,), {}))(x))
artifact = os.path.join(os.getcwd(), "plain.aot")
torch.compile(plain, fullgraph=True, backend=BACKEND).aot_compile(((x,), {})).save_compiled_function(artifact)
with open(artifact, "rb") as f:
    loaded = torch.compiler.load_compiled_function(f)
attempt("guard-miss", lambda: loaded(torch.randn(4, 3)))
out["report"] = report_of("aot-fallback")
print(json.dumps(out))
"""
CASES = {
    "graph-break": "torch._dynamo.exc.Unsupported",
    "not-serializable": "builtins.RuntimeError",
    "guard-miss": "builtins.RuntimeError",
}


def _run(tmp: Path, enabled: bool) -> dict[str, Any]:
    write_models(tmp)
    script = tmp / "signatures_scenario.py"
    script.write_text(PRELUDE + "os.chdir(os.path.dirname(os.path.abspath(__file__)))\n" + textwrap.dedent(SCENARIO))
    env = {
        **only_fix(FIX_ID, enabled),
        "PYTHONPATH": str(tmp) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"),
        "TORCHFIX_AOT_FALLBACK_MEMO": "0",  # each run decides afresh; nothing written outside tmp
    }
    return run_json_script([script], env=env)


@pytest.fixture(scope="module")
def red(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fix off (the other fixes too): torch's own AOT errors."""
    if not IN_RANGE:
        pytest.skip("torch outside aot-fallback's validated range (see test_versions.py)")
    return _run(tmp_path_factory.mktemp("red"), enabled=False)


@pytest.fixture(scope="module")
def green(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not IN_RANGE:
        pytest.skip("torch outside aot-fallback's validated range (see test_versions.py)")
    return _run(tmp_path_factory.mktemp("green"), enabled=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_red_run_raises_the_aot_error(red: dict[str, Any], case: str) -> None:
    assert red[case]["error_type"] == CASES[case], red[case]


@pytest.mark.parametrize("case", sorted(CASES))
def test_red_error_is_explained_not_installed_and_disabled(red: dict[str, Any], case: str) -> None:
    assert_explained_both_ways(failure_text(red[case]), FIX_ID)


def test_graph_break_message_alone_is_not_claimed(red: dict[str, Any]) -> None:
    """The same Unsupported message without its AOT traceback (a plain fullgraph compile's
    graph break, as far as the text shows) is not aot-fallback's."""
    from torchfix_core.testing import explain_json

    text = failure_text({k: v for k, v in red["graph-break"].items() if k != "traceback"})
    named = {m["id"] for m in explain_json(text, isolated=True)["matches"]}
    assert FIX_ID not in named, named


def test_green_run_counts_each_fallback(green: dict[str, Any]) -> None:
    assert all(green[case]["error"] is None for case in CASES), green
    report = green["report"]
    assert report["state"] == "applied" and report["acted"] == 3, report
    assert report["events"]["fell-back-on-compile"] == 2, report
    assert report["events"]["served-guard-miss-by-jit"] == 1, report


def test_disabled_run_counts_nothing(red: dict[str, Any]) -> None:
    assert red["report"]["state"] == "disabled" and red["report"]["acted"] == 0, red["report"]


# -- magi-aot-fallback -------------------------------------------------------------------------------


def _magi(tmp: Path, model: str, env: dict[str, str]) -> dict[str, Any]:
    return run_json_script(
        [DRIVER],
        env={
            **env,
            "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"),
            "MAGI_COMPILE_CACHE_ROOT_DIR": str(tmp / "magi"),
            "TFTEST_MAGI_AOT": json.dumps({"model": model}),
        },
    )


def _magi_env(enabled: bool) -> dict[str, str]:
    env = only_fix(MAGI_ID, enabled)
    if enabled and state_to_expect(MAGI_ID, bug_present=True) == "out-of-range":
        env["TORCHFIX_FORCE"] = MAGI_ID
    return env


@pytest.fixture(scope="module")
def magi_red(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Magi's AOT mode with every fix off: the plain and the graph-breaking model."""
    if not MAGI:
        pytest.skip("magi_compiler is not installed (nox -s magi installs it)")
    tmp = tmp_path_factory.mktemp("magi-red")
    return {model: _magi(tmp / model, model, _magi_env(False)) for model in ("plain", "graph_break")}


def _magi_case(magi_red: dict[str, dict[str, Any]], model: str) -> dict[str, Any]:
    out = magi_red[model]
    if out["ok"]:
        pytest.skip(f"Magi's AOT path runs the {model} model on this torch: no red run")
    return out


@pytest.mark.parametrize("model", ["plain", "graph_break"])
def test_magi_red_error_is_explained_not_installed_and_disabled(
    magi_red: dict[str, dict[str, Any]], model: str
) -> None:
    assert_explained_both_ways(failure_text(_magi_case(magi_red, model)), MAGI_ID)


def test_magi_green_run_counts_the_fallback(magi_red: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    _magi_case(magi_red, "plain")
    out = _magi(tmp_path, "plain", _magi_env(True))
    assert out["ok"], out
    report = out["report"]
    assert report["state"] == "applied" and report["acted"] == 1, report
    assert report["events"]["fell-back-magi-state"] == 1, report


def test_magi_disabled_run_counts_nothing(magi_red: dict[str, dict[str, Any]]) -> None:
    for model, out in magi_red.items():
        assert out["report"]["state"] == "disabled" and out["report"]["acted"] == 0, (model, out["report"])
