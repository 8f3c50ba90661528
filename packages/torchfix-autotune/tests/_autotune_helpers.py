"""Helpers shared by torchfix-autotune's tests (unique module name: packages are tested together)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable

from torchfix_core.testing import reproduce, run_json_script

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

HERE = Path(__file__).resolve().parent


@functools.cache
def sac_replay_is_strict() -> bool:
    """The live probe (torch 2.13+: True; 2.8-2.12: False)."""
    from torchfix_autotune.probes import sac_replay_behaviour

    return sac_replay_behaviour().strict


@functools.cache
def compiled_code_runs_under_sac() -> bool:
    """Whether Dynamo runs compiled code inside a SAC region: SAC's two modes declare
    ``ignore_compile_internals()`` (torch 2.10+). On 2.8/2.9 they do not (2.8 has no such method), so
    Dynamo skips every frame under them and a compiled function called inside SAC runs eagerly:
    no compiled artifact, hence no autotuning, ever runs in a recompute. Read on the live modes."""
    import torch
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    modes = create_selective_checkpoint_contexts([torch.ops.aten.mm.default])
    return all(getattr(mode, "ignore_compile_internals", lambda: False)() is True for mode in modes)


def run_script(script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict[str, Any]:
    """Run ``tests/<script>`` in a fresh interpreter; return the JSON of its last stdout line."""
    return run_json_script([HERE / script, *args], env=env, timeout=timeout)


def reproduce_with_report(fix: bool) -> dict[str, Any]:
    """The fix's declared reproduction, this fix alone on (``fix``) or off, with the report its
    interpreter wrote (``torchfix_core.testing.reproduce(..., with_report=True)``)."""
    return reproduce("autotune", fix, with_report=True)


def backward_outcome(
    backward: Callable[[], None], grads: tuple[Any, Any], refs: tuple[Any, Any], *, rtol: float, atol: float
) -> dict[str, Any]:
    """Run ``backward``; on SAC's RuntimeError ``{"ok": False, "error": first sentence, "error_type",
    "traceback"}`` (the traceback as Python prints it), else whether the two gradients match the
    reference ones (``grads``/``refs`` read after backward)."""
    try:
        backward()
    except RuntimeError as exc:
        import traceback

        return {
            "ok": False,
            "error": str(exc).split(". ")[0],
            "error_type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "traceback": "".join(traceback.format_exception(exc))[-6000:],
        }
    import torch

    (gx, gw), (rx, rw) = (g.grad for g in grads), (r.grad for r in refs)
    assert gx is not None and gw is not None and rx is not None and rw is not None
    return {
        "ok": True,
        "grads_match": bool(
            torch.allclose(gx, rx, rtol=rtol, atol=atol) and torch.allclose(gw, rw, rtol=rtol, atol=atol)
        ),
        "max_grad_diff": float(max((gx - rx).abs().max(), (gw - rw).abs().max())),
        "grad_norm": round(float(gx.norm()), 4),
    }
