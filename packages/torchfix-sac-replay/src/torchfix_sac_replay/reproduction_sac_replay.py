"""sac-replay's scenarios, behind its declared reproduction (:func:`torchfix_sac_replay.reproduction.sac_replay`),
the tests, the demo and the GPU tests (the in-process tests import :func:`on_thread` from here):

    python -m torchfix_sac_replay.reproduction_sac_replay SCENARIO [--device cpu|cuda] [--wrapper] [--limit N]
                                                      [--same-thread] [--inductor-warmup]

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
tests run; it imports torch inside its functions only.

Prints one JSON line (the last line of stdout) describing what happened, with ``report``: sac-replay's
row of ``torchfix_core.report()`` (state, ``acted``, events). Torchfix is whatever the environment
makes it (``TORCHFIX_DISABLE=sac-replay`` = without the fix). Scenarios:

* ``guard_miss``: BRIEF section 3.4. A compiled block holds 8 Dynamo cache entries, the main thread
  raised ``recompile_limit`` to 64; a SAC-checkpointed call is made, a guarded global flips before
  backward, and backward runs on another thread (CPU: a ``threading.Thread``; CUDA: the autograd
  engine's worker thread, plain ``backward()``). Reports the error (if any), whether the gradients
  equal an un-checkpointed eager reference (``grad_match``) and the largest difference (``grad_error``).
* ``config_read``: the checkpointed function records ``recompile_limit``, ``capture_scalar_outputs``
  and ``dynamic_sources`` in the forward and in the recompute.
* ``cold_autotune``: BRIEF section 2.4, CUDA only: autotuning inside the replay (explanation test).
* ``eager_replay``: BRIEF section 1.1. The forward runs a ``torch.compile``d function under SAC; a flag
  flips so the recompute runs the same math eagerly (a genuine compiled-forward/eager-replay mismatch).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


def fix_state() -> str:
    try:
        import torchfix_core

        return next((r.state for r in torchfix_core.status() if r.id == "sac-replay"), "absent")
    except Exception:  # noqa: BLE001
        return "absent"


def on_thread(fn: Callable[[], T], name: str) -> T:
    """``fn()`` on a new thread named ``name``, joined: its result, or its exception raised here.

    The CPU stand-in for the autograd engine's worker thread (on CPU, ``backward()`` runs the
    recompute on the calling thread); shared with the in-process tests."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again on the calling thread
            box["exc"] = exc

    t = threading.Thread(target=target, name=name)
    t.start()
    t.join()
    if "exc" in box:
        raise box["exc"]
    return box["value"]


def run_backward(loss: torch.Tensor, same_thread: bool, device: str) -> tuple[BaseException | None, str]:
    """Backward on the main thread, or where the recompute runs off the forward thread: a Python
    thread on CPU (stand-in for the worker), the engine's own worker for CUDA tensors. Returns the
    error (None when it passed) and the name of the thread that called ``backward()``."""
    here = same_thread or device == "cuda"
    name = threading.current_thread().name if here else "backward-thread"
    try:
        if here:
            loss.backward()
        else:
            on_thread(loss.backward, name)
    except BaseException as exc:  # noqa: BLE001 - reported in the scenario's JSON line
        return exc, name
    return None, name


def error_fields(exc: BaseException | None) -> dict[str, Any]:
    if exc is None:
        return {"ok": True}
    cause = exc.__cause__
    return {
        "ok": False,
        "error_type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "error": str(exc),
        "cause_type": None if cause is None else f"{type(cause).__module__}.{type(cause).__qualname__}",
        "cause": None if cause is None else str(cause),
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def wrap(fn: Callable[..., Any], use_wrapper: bool, context_fn: Any) -> Callable[..., Any]:
    """``checkpoint(fn, ..., use_reentrant=False)`` or ``checkpoint_wrapper(Module(fn))``."""
    import torch
    from torch.utils.checkpoint import checkpoint

    kwargs = {} if context_fn is None else {"context_fn": context_fn}
    if not use_wrapper:
        return lambda *a: checkpoint(fn, *a, use_reentrant=False, **kwargs)
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    class Block(torch.nn.Module):
        def forward(self, *a: Any) -> Any:
            return fn(*a)

    return checkpoint_wrapper(Block(), **kwargs)


def guard_miss(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch._dynamo
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    dev = args.device
    torch._dynamo.config.recompile_limit = args.limit  # this (main) thread only on torch >= 2.12
    state = {"phase": 0}
    warm = {"eager": not args.inductor_warmup}

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        # The 8 warm-up entries only fill the code object's cache; compiling them with Inductor costs
        # ~3 s each on CPU and changes nothing (--inductor-warmup does it anyway).
        if warm["eager"]:
            return gm.forward
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs)

    def block_math(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
        k = 1.0 if state["phase"] == 0 else 1.0  # same math; the guard on `state` misses after the flip
        return torch.relu(x @ w)[:, :n].sin() * k

    block = torch.compile(block_math, dynamic=False, backend=backend)
    torch.manual_seed(0)
    w = torch.randn(32, 32, device=dev, requires_grad=True)
    with torch.no_grad():
        for n in range(1, 9):
            block(torch.randn(4, 32, device=dev), w, n)  # 8 cache entries
    warm["eager"] = False
    x = torch.randn(4, 32, device=dev, requires_grad=True)
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    out = wrap(block, args.wrapper, sac)(x, w, 16)
    state["phase"] = 1
    exc, thread = run_backward(out.sum(), args.same_thread, dev)
    result = error_fields(exc)
    if exc is None:
        xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        block_math(xr, wr, 16).sum().backward()
        tol = 1e-5 if dev == "cpu" else 1e-4  # fused CUDA kernels vs eager, float32
        result["grad_match"] = bool(
            torch.allclose(x.grad, xr.grad, atol=tol, rtol=tol) and torch.allclose(w.grad, wr.grad, atol=tol, rtol=tol)
        )
        result["grad_error"] = max(float((x.grad - xr.grad).abs().max()), float((w.grad - wr.grad).abs().max()))
        result["grad_norm"] = float(w.grad.norm())
    result["backward_thread"] = thread
    return result


def config_read(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch._dynamo

    dev = args.device
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.capture_scalar_outputs = True
    torch.compiler.config.dynamic_sources = "L['n']"
    seen: list[dict[str, Any]] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(
            {
                "thread": threading.current_thread().name,
                "recompile_limit": torch._dynamo.config.recompile_limit,
                "capture_scalar_outputs": torch._dynamo.config.capture_scalar_outputs,
                "dynamic_sources": torch.compiler.config.dynamic_sources,
            }
        )
        return x.sin().cos()

    x = torch.randn(8, device=dev, requires_grad=True)
    out = wrap(fn, args.wrapper, None)(x)
    exc, thread = run_backward(out.sum(), args.same_thread, dev)
    result = error_fields(exc)
    result["forward"] = seen[0] if seen else None
    result["recompute"] = seen[1] if len(seen) > 1 else None
    result["backward_thread"] = thread
    return result


def eager_replay(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    dev = args.device
    use_compiled = {"on": True}

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w).sin()

    fc = torch.compile(f, dynamic=False)

    def region(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return fc(x, w) if use_compiled["on"] else f(x, w)

    torch.manual_seed(0)
    x = torch.randn(8, 16, device=dev, requires_grad=True)
    w = torch.randn(16, 16, device=dev, requires_grad=True)
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    out = wrap(region, args.wrapper, sac)(x, w)
    use_compiled["on"] = False
    exc, thread = run_backward(out.sum(), True, dev)
    result = error_fields(exc)
    result["backward_thread"] = thread
    return result


def cold_autotune(args: argparse.Namespace) -> dict[str, Any]:
    """BRIEF section 2.4 (CUDA only): a recompute-time recompile launches a cold Triton kernel whose
    autotuning runs inside SAC's replay (2.13+: ``aten.empty.memory_format ... not found in storage``)."""
    import torch
    import torch._dynamo
    import torch._inductor.config as inductor_config
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    inductor_config.coordinate_descent_tuning = True
    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    torch._dynamo.config.specialize_float = True
    s = {"v": 1.0}

    @torch.compile
    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (torch.mm(x, w) * s["v"]).sin().cos()

    x = torch.randn(256, 256, device=args.device, requires_grad=True)
    w = torch.randn_like(x, requires_grad=True)
    block(x, w)  # forward kernels tuned outside SAC
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    out = wrap(block, args.wrapper, sac)(x, w)
    s["v"] += 1.0  # the recompute misses the guard, recompiles, launches a cold kernel
    exc, thread = run_backward(out.sum(), args.same_thread, args.device)
    result = error_fields(exc)
    result["backward_thread"] = thread
    return result


SCENARIOS = {
    "guard_miss": guard_miss,
    "config_read": config_read,
    "eager_replay": eager_replay,
    "cold_autotune": cold_autotune,
}


def run_scenario(argv: Sequence[str]) -> dict[str, Any]:
    """``SCENARIO [OPTIONS]`` (the command line's arguments) run in this interpreter: its result, the
    JSON object the module docstring describes."""
    # one compile worker (a 2-core machine stays responsive); read when Inductor first compiles
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch

    p = argparse.ArgumentParser(prog="python -m torchfix_sac_replay.reproduction_sac_replay")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--device", default="cpu")
    p.add_argument("--wrapper", action="store_true", help="use checkpoint_wrapper instead of checkpoint()")
    p.add_argument("--limit", type=int, default=64, help="main-thread torch._dynamo.config.recompile_limit")
    p.add_argument("--same-thread", action="store_true", help="run backward on the forward's thread")
    p.add_argument("--inductor-warmup", action="store_true", help="compile the 8 warm-up entries with Inductor too")
    args = p.parse_args(list(argv))
    result = SCENARIOS[args.scenario](args)
    result.update(scenario=args.scenario, torch=torch.__version__, fix=fix_state(), device=args.device)
    from torchfix_core.testing import report_of

    result["report"] = report_of("sac-replay")
    return result


def main(argv: list[str]) -> int:
    print(json.dumps(run_scenario(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
