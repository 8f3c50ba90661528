"""The reproductions of aot-fallback (``FixSpec.reproduction``: :func:`aot_fallback`) and
magi-aot-fallback (:func:`magi_aot_fallback`), and the scenario behind the first:
``python -m torchfix_aot_fallback.reproduction`` prints :func:`graph_break_aot`'s result as one
JSON line.

The scenario is the red/green case of the package's tests (``tests/test_compile_fallback.py``): the
AOT compile (``torch.compile(fn, fullgraph=True, backend=...).aot_compile(((x,), {}))``) of a
function with a graph break. torch raises ``torch._dynamo.exc.Unsupported`` (it has no JIT to fall
back to); with the fix the compile returns a ``JITFallback`` whose output matches eager.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests, its demo and the combination suite run; imported only when the reproduction runs (it imports
torch inside its functions). The fix's failure memo is kept in a temporary directory for the run, so
that every run makes the real AOT attempt and leaves nothing in the user's cache.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from torchfix_core.reproduction import Outcome, cannot_run, not_observed, observed

FIX_ID = "aot-fallback"
#: the scenario's input: 16 values, fixed (the comparison with eager is deterministic)
SIZE = 16


def graph_break(x: Any) -> Any:
    """The model: a graph break between two elementwise ops (AOT cannot capture it as one graph)."""
    import torch

    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos() * 2


def backend() -> str:
    """The backend of the AOT compile: ``aot_eager`` where its artifacts are serializable (torch
    2.12+); on 2.11 its AOT compile raises ``AssertionError("expected OutputCode")``, so
    ``inductor``."""
    import torch

    minor = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    return "aot_eager" if minor >= (2, 12) else "inductor"


def unavailable() -> str | None:
    """Why this torch cannot run the scenario (no AOT compile, as on torch 2.8), or None."""
    import importlib.util

    import torch
    import torch._dynamo

    if importlib.util.find_spec("torch._dynamo.aot_compile") is None or not hasattr(
        torch._dynamo.config, "enable_aot_compile"
    ):
        return f"torch {torch.__version__} has no AOT compile (torch._dynamo.aot_compile)"
    return None


def graph_break_aot() -> dict[str, Any]:
    """The AOT compile of :func:`graph_break` (``enable_aot_compile`` set for the call, the fix's memo
    in a temporary directory). Returns ``raised`` (the exception's type name, or None), ``msg`` (its
    first line), and where it returned: ``type`` (of the compiled callable), ``max_abs_diff`` (its
    output against eager's), ``match`` (``torch.allclose``), ``records`` (the fix's fallback records
    in this process, by kind)."""
    import torch
    import torch._dynamo

    from torchfix_aot_fallback import api, memo

    x = torch.linspace(-3.0, 3.0, SIZE)
    with tempfile.TemporaryDirectory(prefix="torchfix-aot-fallback-") as memo_dir:
        previous = memo._dir_override  # a directory the caller set (None: the default)
        api.set_memo_dir(memo_dir)
        try:
            with torch._dynamo.config.patch(enable_aot_compile=True):
                try:
                    compiled = torch.compile(graph_break, fullgraph=True, backend=backend()).aot_compile(((x,), {}))
                except Exception as exc:  # noqa: BLE001 - the result says what the compile raised
                    return {"raised": type(exc).__name__, "msg": (str(exc).strip().splitlines() or [""])[0]}
                out, expected = compiled(x), graph_break(x)
        finally:
            api.set_memo_dir(previous)
    return {
        "raised": None,
        "type": type(compiled).__name__,
        "max_abs_diff": float((out - expected).abs().max()),
        "match": bool(torch.allclose(out, expected)),
        "records": [r.kind for r in api.fallbacks()],
    }


def aot_fallback() -> Outcome:
    """aot-fallback's reproduction: :func:`graph_break_aot` as an :class:`Outcome`. The bug observed
    where the AOT compile raises ``Unsupported`` (the measure: the exception); not observed where it
    returns a callable whose output matches eager's. Another exception, or an output other than
    eager's, means the reproduction broke."""
    why = unavailable()
    if why:
        return cannot_run(why)
    r = graph_break_aot()
    if r["raised"] is not None:
        if r["raised"] != "Unsupported":
            raise RuntimeError(f"the AOT compile failed otherwise than the bug: {r['raised']}: {r['msg'][:300]}")
        return observed(f"{r['raised']}: {r['msg'][:160]}")
    if not r["match"]:
        raise RuntimeError(f"the AOT compile's {r['type']} differs from eager (max abs diff {r['max_abs_diff']:.3g})")
    return not_observed(
        f"AOT compile of a graph-breaking function returned {r['type']}; "
        f"its output against eager: max abs diff {r['max_abs_diff']:.3g}"
    )


# -- magi-aot-fallback ------------------------------------------------------------------------------

#: Magi's AOT step on torch 2.10 - 2.13: the ``"self"`` closure variable of
#: ``AOTCompiledFunction.save_compiled_function`` is missing (every model fails)
MAGI_SELF_CLOSURE = ("ValueError", "tuple.index(x): x not in tuple")


def _magi_config_patch(cache_root: str) -> Any:
    def patch(config: Any) -> Any:
        config.aot = True
        config.backend = "eager"  # Magi's eager backend: the AOT path is the same, no C++ compile
        config.cache_root_dir = cache_root
        return config

    return patch


def magi_plain_aot() -> dict[str, Any]:
    """MagiCompiler's AOT mode (``aot=True``, Magi's eager backend) on a plain model (``Linear(8, 8)``
    then ReLU, ``x`` of shape (4, 8), its first dimension dynamic): the scenario ``plain`` of the
    package's ``tests/_magi_aot_driver.py``. Magi's cache root is a temporary directory, its
    ``MAGI_COMPILE_*`` variables are cleared and ``sys.argv`` has no arguments while it runs
    (``CompileConfig`` parses both). Returns ``error_type``/``error`` (what the call raised, or
    None), ``max_abs_diff`` (against eager) and ``match``, ``state_aot`` (whether the state still
    uses AOT) and ``fallbacks`` (the causes the fix recorded)."""
    import os
    import sys

    import torch

    saved_argv = sys.argv
    saved_env = {k: v for k, v in os.environ.items() if k.startswith("MAGI_COMPILE_")}
    sys.argv = sys.argv[:1]
    for k in saved_env:
        del os.environ[k]
    try:
        with tempfile.TemporaryDirectory(prefix="torchfix-magi-aot-fallback-") as cache_root:
            from magi_compiler import magi_compile

            from torchfix_aot_fallback import magi

            class Plain(torch.nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.lin = torch.nn.Linear(8, 8)

                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    return torch.relu(self.lin(x))

            torch.manual_seed(0)
            model = magi_compile(Plain(), dynamic_arg_dims={"x": 0}, config_patch=_magi_config_patch(cache_root))
            x = torch.randn(4, 8)
            r: dict[str, Any] = {"error_type": None, "error": None}
            try:
                out = model(x)
            except Exception as exc:  # noqa: BLE001 - the result says what the call raised
                r["error_type"] = type(exc).__name__
                r["error"] = (str(exc).strip().splitlines() or [""])[0][:300]
            else:
                with torch.no_grad():
                    expected = torch.relu(model.lin(x))
                r["max_abs_diff"] = float((out.detach() - expected).abs().max())
                r["match"] = bool(torch.allclose(out, expected))
            state = getattr(model, "_magi_state_for_forward", None)
            r["state_aot"] = getattr(getattr(state, "compile_config", None), "aot", None)
            r["fallbacks"] = [rec.cause for rec in magi.records()]
            return r
    finally:
        sys.argv = saved_argv
        os.environ.update(saved_env)


def magi_aot_fallback() -> Outcome:
    """magi-aot-fallback's reproduction: :func:`magi_plain_aot` as an :class:`Outcome`. The bug
    observed where Magi's AOT step aborts the call with the ``"self"`` closure ``ValueError`` (the
    measure: the exception); not observed where the call returns eager's output, through JIT after a
    fallback or through AOT where Magi's AOT path works on this torch. Another exception, or another
    output, means the reproduction broke."""
    import importlib.util

    if importlib.util.find_spec("magi_compiler") is None:
        return cannot_run("magi_compiler is not installed")
    r = magi_plain_aot()
    if r["error_type"] is not None:
        if (r["error_type"], r["error"]) != MAGI_SELF_CLOSURE:
            raise RuntimeError(f"Magi's AOT call failed otherwise than the bug: {r['error_type']}: {r['error']}")
        return observed(f"{r['error_type']}: {r['error'][:160]} (Magi's AOT step; the call aborted)")
    if not r["match"]:
        raise RuntimeError(f"the Magi-compiled model differs from eager (max abs diff {r['max_abs_diff']:.3g})")
    against = f"output against eager: max abs diff {r['max_abs_diff']:.3g}"
    if r["fallbacks"]:
        return not_observed(f"Magi's AOT compile failed ({r['fallbacks'][0][:120]}); the state ran on JIT, {against}")
    return not_observed(f"Magi's AOT path compiled and ran the model (state AOT: {r['state_aot']}), {against}")


def main() -> None:
    """Run :func:`graph_break_aot`; print its result as one JSON line."""
    # run as ``python -m``, this module is ``__main__``: the imported one's model keeps the name the
    # fix's warning and records give it (``torchfix_aot_fallback.reproduction.graph_break``)
    from torchfix_aot_fallback.reproduction import graph_break_aot as scenario

    print(json.dumps(scenario()), flush=True)


if __name__ == "__main__":
    main()
