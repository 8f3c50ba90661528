"""Scenarios of the aot-autocast-key and aot-hop-body-key tests: ``python _aot_cache_key_scenarios.py NAME [ARG]``.

Each runs in a fresh interpreter (the tests pick the fix states through ``only_fix`` and the cache
directory through ``TORCHINDUCTOR_CACHE_DIR``) and prints one JSON line last: the scenario's facts,
the AOTAutograd and FX graph cache counters, the states of the fixes and their ``report()`` rows
(``reports``: what each fix counted). Backend ``inductor``
on CPU: the AOTAutograd cache is used only there.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
import torch._dynamo
import torch._functorch._aot_autograd.autograd_cache as ac
from torch._dynamo.utils import counters
from torch.utils.checkpoint import checkpoint

FIX_IDS = ("aot-autocast-key", "aot-hop-body-key", "aot-bypass-key")


def fix_states() -> dict[str, str]:
    import torchfix_core

    return {r.id: str(r.state) for r in torchfix_core.status() if r.id in FIX_IDS}


def fix_reports() -> dict[str, dict[str, Any]]:
    """Each fix's row of ``torchfix_core.report()`` (state, acted, events) at the end of the scenario."""
    from torchfix_core.testing import report_of

    return {fix_id: report_of(fix_id) for fix_id in FIX_IDS}


def cache_counters() -> dict[str, int]:
    aot = {k: int(v) for k, v in counters["aot_autograd"].items() if k.startswith("autograd_cache")}
    fx = {k: int(v) for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
    return {**aot, **fx}


def close(a: Any, b: Any) -> bool:
    """Equal up to Inductor's reassociation (1e-5 relative); a stale artifact is off by 50% or a dtype."""
    return bool(a.dtype == b.dtype and torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-5))


# --- aot-autocast-key ---------------------------------------------------------------------------


def _mm_relu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w) + 1


def autocast_runs(dtypes: str) -> dict[str, Any]:
    """Compile ``relu(x @ w) + 1`` (inference) and run it under ``torch.autocast("cpu", dtype=D)`` for
    each D of ``dtypes`` (comma-separated), in this process; each result against eager."""
    if os.environ.get("AOT_CACHE") == "0":  # the FX graph cache alone (AOTAutograd cache off)
        torch._functorch.config.enable_autograd_cache = False
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    compiled = torch.compile(_mm_relu, backend="inductor")
    runs = []
    for name in dtypes.split(","):
        with torch.autocast("cpu", dtype=getattr(torch, name)):
            out, ref = compiled(x, w), _mm_relu(x, w)
        runs.append({"autocast": name, "dtype": str(out.dtype), "eager_dtype": str(ref.dtype),
                     "equal": bool(out.dtype == ref.dtype and close(out, ref))})  # fmt: skip
    return {"runs": runs}


def autocast_keys(_: str) -> dict[str, Any]:
    """The AOTAutograd key of one graph under bfloat16, float16 and no autocast, with the live classes
    (the fix's probe helper), plus whether the details pickle."""
    import pickle

    from torchfix_placement_cache.autocast_key import ATTRIBUTE, key_under_autocast, probe_graph

    keys = {name: key_under_autocast(getattr(torch, name)) for name in ("bfloat16", "float16")}
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    gm = probe_graph()
    with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv()))):
        details = ac.AOTAutogradCacheDetails(gm, [], None, {})
    state = getattr(details, ATTRIBUTE, None)
    return {"keys": keys, "state": repr(state), "state_pickles": pickle.loads(pickle.dumps(state)) == state}


# --- aot-hop-body-key ---------------------------------------------------------------------------

SCALE = [float(os.environ.get("SCALE", "2"))]


@torch._dynamo.allow_in_graph
def opaque(x: torch.Tensor) -> torch.Tensor:
    """Reads a global Dynamo never sees (allow_in_graph: not traced, so not guarded)."""
    return x * SCALE[0]


def _opaque_body(x: torch.Tensor) -> torch.Tensor:
    return opaque(torch.sin(x))


def _plain_body(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(torch.sin(x)) * 2


def _compiled_against_eager(fn: Any) -> dict[str, Any]:
    """``fn`` compiled with inductor, forward and backward (the AOTAutograd entry is saved after the
    backward), against ``fn`` eager: outputs and gradients."""
    torch.manual_seed(0)
    x = torch.randn(8, requires_grad=True)
    out = torch.compile(fn, backend="inductor")(x)
    out.backward()
    grad = x.grad.detach().clone()  # type: ignore[union-attr]
    x.grad = None
    ref = fn(x)
    ref.backward()
    return {"scale": SCALE[0], "out_ok": close(out, ref), "grad_ok": close(grad, x.grad),
            "out": float(out), "ref": float(ref)}  # fmt: skip


def checkpointed(which: str) -> dict[str, Any]:
    """``sum(checkpoint(body, x))`` compiled; ``which`` is ``opaque`` (a body calling :func:`opaque`)
    or ``plain`` (torch ops)."""
    body = _opaque_body if which == "opaque" else _plain_body
    return _compiled_against_eager(lambda x: checkpoint(body, x, use_reentrant=False).sum())


def nested_region(which: str) -> dict[str, Any]:
    """:func:`checkpointed` with the body in ``torch.compiler.nested_compile_region`` instead of a
    checkpoint: Dynamo captures it as an ``invoke_subgraph`` body (no checkpoint)."""
    body = torch.compiler.nested_compile_region(_opaque_body if which == "opaque" else _plain_body)
    return _compiled_against_eager(lambda x: body(x).sum())


def nested_check(_: str) -> dict[str, Any]:
    """``check_cacheable`` on the fix's probe graph (a root holding a body that calls a plain function)."""
    from torchfix_placement_cache.hop_body_key import nested_graph, refuses

    root, body = nested_graph()
    return {"root_bypasses": refuses(ac, root), "body_bypasses": refuses(ac, body)}


SCENARIOS = {
    "autocast_runs": autocast_runs,
    "autocast_keys": autocast_keys,
    "checkpointed": checkpointed,
    "nested_region": nested_region,
    "nested_check": nested_check,
}

if __name__ == "__main__":
    name, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    result = SCENARIOS[name](arg)
    result.update(torch=torch.__version__, states=fix_states(), counters=cache_counters(), reports=fix_reports())
    print(json.dumps(result))
