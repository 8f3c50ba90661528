"""Demo of torchfix-aot-fallback (CPU, under a minute): ``python packages/torchfix-aot-fallback/demo.py``.

Runs, without the fix and with it (every other fix off), first the scenario behind the fix's
declared reproduction (``python -m torchfix_aot_fallback.reproduction``, shipped in the wheel): the
AOT compile of a function with a graph break raises ``torch._dynamo.exc.Unsupported`` without the
fix and returns a JIT callable whose output matches eager with it; then one script showing that a
backend ``AssertionError`` still propagates and that a loaded artifact called with another input
shape is served by JIT instead of raising.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

from torchfix_core.testing import clean_environ, only_fix, run_json_script_timed

FIX_ID = "aot-fallback"
#: the scenario behind the declared reproduction, shipped in the wheel
SCENARIO = "torchfix_aot_fallback.reproduction"

SCRIPT = textwrap.dedent(
    """
    import os, tempfile, logging
    import torch, torch._dynamo
    torch._dynamo.config.enable_aot_compile = True
    logging.basicConfig(format="    log: %(message)s")

    def plain(x):
        return x.sin() + 1

    x = torch.randn(16)
    def bad_backend(gm, example_inputs):
        raise AssertionError("a real compiler bug")
    try:
        torch.compile(plain, fullgraph=True, backend=bad_backend).aot_compile(((x,), {}))
    except Exception as e:
        print(f"  backend AssertionError: propagates as {type(e).__name__} (never a fallback)")

    path = os.path.join(tempfile.mkdtemp(), "plain.aot")
    torch.compile(plain, fullgraph=True, backend="aot_eager").aot_compile(((x,), {})).save_compiled_function(path)
    with open(path, "rb") as f:
        loaded = torch.compiler.load_compiled_function(f)
    other = torch.randn(3, 5)
    try:
        print(f"  loaded artifact, other shape: matches eager: {torch.allclose(loaded(other), plain(other))}")
    except Exception as e:
        print(f"  loaded artifact, other shape: {type(e).__name__}: {str(e).splitlines()[0][:60]}")
    import torchfix_core
    row = next(r for r in torchfix_core.status() if r.id == "aot-fallback")
    print(f"  doctor row: {row.state}: {row.reason[:160]}")
    """
)


def graph_break_line(env: dict[str, str]) -> str:
    """The declared reproduction's scenario in a fresh interpreter: one line."""
    r = run_json_script_timed(["-m", SCENARIO], env=env)
    if "error" in r:
        return f"  graph-break model: {r['error'][:200]}"
    if r["raised"]:
        return f"  graph-break model: {r['raised']}: {r['msg']} ({r['seconds']:.1f} s)"
    return (
        f"  graph-break model: {r['type']}, output against eager: max abs diff {r['max_abs_diff']:.3g} "
        f"({r['seconds']:.1f} s)"
    )


def run(title: str, enabled: bool) -> None:
    cache = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="aotfb-demo-")}
    env = clean_environ({**cache, **only_fix(FIX_ID, enabled)})
    print(title)
    print(graph_break_line({**cache, **only_fix(FIX_ID, enabled)}))
    script = os.path.join(tempfile.mkdtemp(prefix="aotfb-demo-"), "demo_script.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    proc = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout.rstrip())
    for line in proc.stderr.splitlines():
        if line.startswith("    log:"):
            print(line[:220])
    if proc.returncode != 0:
        print(f"  (exit {proc.returncode}) {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")


def main() -> None:
    print("== aot-fallback: torch AOT compile has no JIT fallback ==")
    run("-- without the fix (TORCHFIX_DISABLE=all):", False)
    run("-- with the fix (TORCHFIX_DISABLE=all, TORCHFIX_AOT_FALLBACK_ENABLED=1):", True)


if __name__ == "__main__":
    main()
