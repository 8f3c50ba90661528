"""pytorch#185372 on the running torch, in a fresh interpreter: the scenario behind backward-context's
declared reproduction (:func:`torchfix_sac_replay.reproduction.backward_context`), the tests and the demo.

    python -m torchfix_sac_replay.reproduction_backward_context [--checkpoint] [--timeout SECONDS]

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests run; it imports torch inside its functions only, and sets the second device up (once per
process, before the process's first backward) when the scenario runs.

Two ``torch.compile``d functions (backend ``aot_eager``) feed one ``backward()``: region A on the
CPU, region B returns its result on a second device. On a CPU-only machine that device is torch's
own Python ``PrivateUse1`` backend (``torch.utils.backend_registration.
_setup_privateuseone_for_python_backend``, the mechanism of upstream's
``test/test_privateuseone_python_backend.py``): the autograd engine gives it a worker thread, as it
gives one to each GPU, so B's compiled backward runs on that thread while A's runs on the calling
thread, the CPU + CUDA situation of the upstream report. Both compiled backwards meet at a
``threading.Barrier`` inside their bodies (a custom op of each backward graph), so they are inside
``_cc.run`` at the same moment on every run: deterministic, no timing luck.

Without the fix (torch 2.12-2.13) the second one to start raises ``RuntimeError: cannot enter
context: <_contextvars.Context ...> is already entered``; with it both run (each in a copy of the
backward's context) and still see a ContextVar set before ``backward()``. ``--checkpoint`` wraps both
regions in non-reentrant ``torch.utils.checkpoint`` (their recompute runs in the backward too: the
situation where ``sac-replay`` also acts). Prints one JSON line (with ``report``: the fix's row of
``torchfix_core.report()``); torchfix is whatever the environment makes it
(``TORCHFIX_DISABLE=backward-context`` = without the fix).
"""

from __future__ import annotations

import argparse
import contextvars
import functools
import json
import os
import sys
import threading
import traceback
from types import SimpleNamespace
from typing import Any

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("torchfix_backward_context_test", default="unset")
SYNC: dict[str, Any] = {"barrier": None}
SEEN: list[dict[str, str]] = []
#: the schema of each of the scenario's custom ops: one tensor in, one out
SCHEMA = "(Tensor {}) -> Tensor"


def _meet(where: str) -> None:
    SEEN.append({"op": where, "thread": threading.current_thread().name, "var": VAR.get()})
    barrier = SYNC["barrier"]
    if barrier is not None:
        barrier.wait()


@functools.cache
def setup() -> SimpleNamespace:
    """The second device (``tfdev``, torch's Python ``PrivateUse1`` backend) and the scenario's
    custom ops, registered once per process; must run before the process's first backward (the
    engine counts devices once, when it starts its threads). Returns the two regions."""
    import torch
    from torch.utils.backend_registration import _DummyBackendModule, _setup_privateuseone_for_python_backend

    class _Backend(_DummyBackendModule):  # type: ignore[misc]
        """The device module; checkpoint's recompute opens an autocast context for every device it saw."""

        def get_amp_supported_dtype(self) -> list[torch.dtype]:
            return [torch.float16, torch.bfloat16]

    _setup_privateuseone_for_python_backend("tfdev", backend_module=_Backend())
    # the schemas are given: these functions' annotations name torch, which is no global of this module

    @torch.library.custom_op("torchfix_ctx_test::to_dev", mutates_args=(), schema=SCHEMA.format("x"))
    def to_dev(x: torch.Tensor) -> torch.Tensor:
        return torch._C._acc.create_empty_tensor(list(x.shape), x.dtype)  # no storage; only its grad is used

    @to_dev.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty(x.shape, dtype=x.dtype, device="tfdev")

    @torch.library.custom_op("torchfix_ctx_test::from_dev", mutates_args=(), schema=SCHEMA.format("g"))
    def from_dev(g: torch.Tensor) -> torch.Tensor:
        _meet("from_dev")
        return torch.ones(g.shape, dtype=g.dtype)

    @from_dev.register_fake
    def _(g: torch.Tensor) -> torch.Tensor:
        return torch.empty(g.shape, dtype=g.dtype, device="cpu")

    to_dev.register_autograd(lambda ctx, g: from_dev(g))

    @torch.library.custom_op("torchfix_ctx_test::hold", mutates_args=(), schema=SCHEMA.format("x"))
    def hold(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @hold.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    @torch.library.custom_op("torchfix_ctx_test::hold_backward", mutates_args=(), schema=SCHEMA.format("g"))
    def hold_backward(g: torch.Tensor) -> torch.Tensor:
        _meet("hold_backward")
        return g.clone()

    @hold_backward.register_fake
    def _(g: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(g)

    hold.register_autograd(lambda ctx, g: hold_backward(g))

    def region_a(x: torch.Tensor) -> torch.Tensor:
        return hold(x.sin() * 3)  # CPU; x.sin() saves x for the backward (recomputed under --checkpoint)

    def region_b(x: torch.Tensor) -> torch.Tensor:
        return to_dev(x.sin() * 2)  # result on the second device: its backward runs on that device's thread

    return SimpleNamespace(region_a=region_a, region_b=region_b)


def fix_states() -> dict[str, str]:
    try:
        import torchfix_core

        rows = {r.id: str(r.state) for r in torchfix_core.status()}
    except Exception:  # noqa: BLE001
        rows = {}
    return {k: rows.get(k, "absent") for k in ("backward-context", "sac-replay")}


def main(argv: list[str]) -> dict[str, Any]:
    """``[--checkpoint] [--timeout SECONDS]``: run the scenario in this interpreter, return its result."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    import torch._dynamo  # noqa: F401 - the fixes' trigger: applied (or not) before the regions are compiled
    from torch.utils.checkpoint import checkpoint

    regions = setup()
    parser = argparse.ArgumentParser(prog="python -m torchfix_sac_replay.reproduction_backward_context")
    parser.add_argument("--checkpoint", action="store_true")
    parser.add_argument("--timeout", type=float, default=20.0)
    opts = parser.parse_args(argv)

    ca = torch.compile(regions.region_a, backend="aot_eager", fullgraph=True)
    cb = torch.compile(regions.region_b, backend="aot_eager", fullgraph=True)

    def run(fn: Any, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(fn, x, use_reentrant=False) if opts.checkpoint else fn(x)

    def dev_grad() -> torch.Tensor:
        return torch._C._acc.create_empty_tensor([4], torch.float32)

    x = torch.linspace(-1.0, 1.0, 4, requires_grad=True)
    # Warm-up, one region per backward (nothing runs at the same time): compiles both backwards, so the
    # measured backward below runs only compiled code.
    run(ca, x).sum().backward()
    torch.autograd.backward([run(cb, x)], [dev_grad()])
    x.grad = None
    SEEN.clear()

    result: dict[str, Any] = {"torch": torch.__version__, "checkpoint": opts.checkpoint, **fix_states()}
    a, b = run(ca, x), run(cb, x)
    SYNC["barrier"] = threading.Barrier(2, timeout=opts.timeout)
    token = VAR.set("set-before-backward")
    try:
        torch.autograd.backward([a, b], [torch.ones(4), dev_grad()])
        result["ok"] = True
    except Exception as exc:  # noqa: BLE001
        result.update(
            ok=False,
            error_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
            error=str(exc).splitlines()[0] if str(exc) else "",
            traceback=traceback.format_exc()[-3000:],
        )
    finally:
        VAR.reset(token)
        SYNC["barrier"] = None
    expected = 5 * torch.cos(x.detach())
    result["grad_ok"] = x.grad is not None and bool(torch.allclose(x.grad, expected, rtol=1e-5, atol=1e-6))
    result["seen"] = list(SEEN)
    from torchfix_core.testing import report_of

    result["report"] = report_of("backward-context")
    return result


if __name__ == "__main__":
    out = main(sys.argv[1:])
    print(json.dumps(out), flush=True)
    sys.stderr.flush()
    # The engine's device thread is still parked; exiting through the interpreter's teardown can abort
    # with "terminate called without an active exception". The result is printed: leave at once.
    os._exit(0)
