"""Demo of torchfix-aot-fallback (CPU, under a minute): ``python packages/torchfix-aot-fallback/demo.py``.

Runs one script twice in fresh interpreters: with ``TORCHFIX_DISABLE=aot-fallback`` the AOT compile
of a model with a graph break raises ``torch._dynamo.exc.Unsupported``; with the fix it returns a
JIT callable whose output matches eager, a backend ``AssertionError`` still propagates, and a
loaded artifact called with another input shape is served by JIT instead of raising.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

from torchfix_core.testing import clean_environ

SCRIPT = textwrap.dedent(
    """
    import os, tempfile, logging
    import torch, torch._dynamo
    torch._dynamo.config.enable_aot_compile = True
    logging.basicConfig(format="    log: %(message)s")

    def model(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    def plain(x):
        return x.sin() + 1

    x = torch.randn(16)
    try:
        fn = torch.compile(model, fullgraph=True, backend="aot_eager").aot_compile(((x,), {}))
        print(f"  graph-break model: {type(fn).__name__}, matches eager: {torch.allclose(fn(x), model(x))}")
    except Exception as e:
        print(f"  graph-break model: {type(e).__name__}: {str(e).splitlines()[0]}")

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


def run(title: str, env_extra: dict[str, str]) -> None:
    cache = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="aotfb-demo-")}
    env = clean_environ({**cache, **env_extra})
    print(title)
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
    run("-- torchfix disabled (TORCHFIX_DISABLE=aot-fallback):", {"TORCHFIX_DISABLE": "aot-fallback"})
    run("-- torchfix enabled:", {})


if __name__ == "__main__":
    main()
