"""autotune's reproduction (``FixSpec.reproduction``: :func:`cold_autotune_in_recompute`), and the
scenario behind it (:func:`run_scenario`).

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the package's
GPU tests and its demo run; imported only when a reproduction runs (it imports torch inside its
functions). The scenario wants a fresh interpreter: it sets Inductor's options through the
environment before torch is imported (on CUDA the recompute runs on the autograd worker thread,
which does not see the main thread's config overrides on torch >= 2.12), and it needs Inductor's
in-memory kernel caches to itself.

The case (a real Inductor compile, real Triton autotuning): a compiled block (``mm`` + pointwise +
``softmax``, so Triton kernels with several configs and coordinate-descent tuning) is warmed
outside selective activation checkpointing (SAC), run under SAC, then a guarded global flips and
Inductor's in-memory caches are cleared before backward: the recompute misses the guard,
recompiles, and launches freshly loaded (cold) Triton kernels, whose autotuning runs inside SAC's
replay mode. Both branches compute the same math, so the gradients must match a non-checkpointed
eager reference. On torch 2.13+ (strict replay, pytorch PR #176455) the autotuner's own
allocations fail the replay without the fix; on 2.11-2.12 replay is lenient and nothing fails.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from typing import Any, Iterator

from torchfix_core.reproduction import Outcome, cannot_run, not_observed, observed

#: the gradients' tolerance against the eager reference (a compiled, autotuned graph is not bit-exact)
RTOL, ATOL = 1e-3, 1e-4
#: the strict-replay error's tail (``<op> [invocation index N ]encountered during backward ...``)
BUG_ERROR = "encountered during backward but not found in storage"
#: the ops ``CachingAutotuner`` dispatches while tuning: the L2-flush buffer (``torch.empty``, the
#: first one for kernels without mutated arguments), ``clone_preserve_strides`` (``as_strided`` /
#: ``clone``, first for kernels with mutated arguments) and ``reset_to_zero_args`` (``zero_``)
AUTOTUNER_OPS = (
    "aten.empty.memory_format",
    "aten.as_strided.default",
    "aten.clone.default",
    "aten.empty_strided.default",
    "aten.zero_.default",
)
#: Inductor's options for the case: coordinate-descent tuning (more autotuning in the recompute) and
#: no on-disk cache hit (the autotuner must be cold); the cache directory is a fresh one per run
INDUCTOR_ENV = {"TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}


@contextlib.contextmanager
def inductor_environment() -> Iterator[None]:
    """:data:`INDUCTOR_ENV` and a fresh ``TORCHINDUCTOR_CACHE_DIR`` in ``os.environ`` for the
    duration (the previous values restored after). Enter it before torch is imported: torch reads
    ``TORCHINDUCTOR_FORCE_DISABLE_CACHES`` at ``import torch`` (``torch.compiler.config``) and the
    coordinate-descent switch when Inductor's config is imported; an override on the main thread
    would not reach the autograd worker thread that runs the recompute on CUDA (torch >= 2.12).
    :func:`run_scenario` checks that both took effect."""
    with tempfile.TemporaryDirectory(prefix="torchfix-autotune-") as cache:
        wanted = {**INDUCTOR_ENV, "TORCHINDUCTOR_CACHE_DIR": cache}
        before = {name: os.environ.get(name) for name in wanted}
        os.environ.update(wanted)
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def run_scenario(device: str = "cuda") -> dict[str, Any]:
    """The case of the module docstring on ``device``, in this interpreter (call it once per
    interpreter, inside :func:`inductor_environment` entered before torch was imported; raises
    ``RuntimeError`` where Inductor's options did not take effect). Returns ``torch``, ``device``,
    ``frames_compiled_during_backward`` and ``coordesc_bench_during_backward`` (Inductor's own
    counters: the recompute recompiled, and autotuned), and either ``ok`` false with the backward's
    ``RuntimeError`` (``error``: its first sentence, ``error_type``, ``traceback`` as Python prints
    it), or ``ok`` true with ``grads_match`` and ``max_grad_diff`` against eager code.

    ``device="cpu"`` runs the same flow on CPU Inductor (no Triton, so no autotuning): a check of
    the recompile-in-recompute plumbing and the comparison, not a reproduction."""
    import torch
    import torch._inductor.config as inductor_config
    import torch._inductor.runtime.triton_heuristics  # noqa: F401 - the fix's trigger: applied before the case
    from torch._dynamo.utils import counters
    from torch._inductor.utils import clear_caches
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    if not (inductor_config.coordinate_descent_tuning and inductor_config.force_disable_caches):
        raise RuntimeError(
            "torch was imported before the reproduction set "
            f"{', '.join(f'{k}={v}' for k, v in INDUCTOR_ENV.items())} (coordinate descent "
            f"{inductor_config.coordinate_descent_tuning}, caches disabled {inductor_config.force_disable_caches}): "
            "run it in a fresh interpreter (python -m torchfix_core.reproduction autotune)"
        )
    flag = {"recompute_branch": False}

    def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.mm(x, w)
        return h.sin().cos() * torch.softmax(h, dim=-1)

    @torch.compile
    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if flag["recompute_branch"]:  # same math; only the guard differs
            return math(x, w)
        return math(x, w)

    def synchronize() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    x = torch.randn(1024, 512, device=device, requires_grad=True)
    w = (torch.randn(512, 512, device=device) / 16).requires_grad_()
    ref_x, ref_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    math(ref_x, ref_w).sum().backward()

    block(x, w)  # compiled and tuned outside SAC
    synchronize()
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    out = checkpoint(block, x, w, use_reentrant=False, context_fn=sac)
    flag["recompute_branch"] = True  # the recompute misses the guard and recompiles ...
    clear_caches()  # ... and the identical kernel source is loaded fresh: its autotuner is cold

    coordesc_before = counters["inductor"]["coordesc_tuning_bench"]
    frames_before = counters["frames"]["ok"]
    result: dict[str, Any] = {"torch": torch.__version__, "device": device}
    try:
        out.sum().backward()
        synchronize()
    except RuntimeError as exc:
        import traceback

        result.update(
            ok=False,
            error=str(exc).split(". ")[0].splitlines()[0],
            error_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback="".join(traceback.format_exception(exc))[-6000:],
        )
    else:
        (gx, gw), (rx, rw) = (x.grad, w.grad), (ref_x.grad, ref_w.grad)
        assert gx is not None and gw is not None and rx is not None and rw is not None
        result.update(
            ok=True,
            grads_match=bool(
                torch.allclose(gx, rx, rtol=RTOL, atol=ATOL) and torch.allclose(gw, rw, rtol=RTOL, atol=ATOL)
            ),
            max_grad_diff=float(max((gx - rx).abs().max(), (gw - rw).abs().max())),
        )
    result["frames_compiled_during_backward"] = counters["frames"]["ok"] - frames_before
    result["coordesc_bench_during_backward"] = counters["inductor"]["coordesc_tuning_bench"] - coordesc_before
    return result


def _missing() -> str | None:
    """What this machine lacks for the case (``None``: nothing)."""
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is false): the bug needs Inductor's Triton autotuner"
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed: Inductor compiles no GPU kernel without it"
    major, minor = torch.cuda.get_device_capability()
    if major < 7:
        return f"the GPU's compute capability {major}.{minor} is below Triton's 7.0"
    return None


def cold_autotune_in_recompute() -> Outcome:
    """autotune's reproduction (pytorch PR #176455's strict replay meeting a cold autotuner): the
    case of the module docstring on the GPU. The bug observed where the backward raises SAC's
    strict-replay error for an op the autotuner dispatches (the measure: the exception), or where
    the gradients differ from eager code's (the measure: the largest difference); not observed where
    the recompute recompiled, autotuned (Inductor's coordinate-descent benchmarks counted during
    backward) and the gradients of ``x`` and ``w`` match eager code's. Cannot run without a CUDA GPU
    and Triton. Another failure, or a recompute that did not recompile and autotune (which would
    prove nothing), means the reproduction broke."""
    with inductor_environment():  # before torch is imported (python -m torchfix_core.reproduction imports none)
        missing = _missing()
        if missing is not None:
            return cannot_run(missing)
        r = run_scenario("cuda")
    if not r["ok"]:
        op, _, rest = r["error"].partition(" ")
        if BUG_ERROR not in rest or op not in AUTOTUNER_OPS:
            raise RuntimeError(f"failed otherwise than the bug: {r['error_type']}: {r['error'][:300]}")
        return observed(f"{r['error_type'].rsplit('.', 1)[-1]}: {r['error'][:200]}")
    if r["frames_compiled_during_backward"] < 1 or r["coordesc_bench_during_backward"] < 1:
        raise RuntimeError(
            "the recompute did not recompile and autotune (frames compiled during backward: "
            f"{r['frames_compiled_during_backward']}, coordinate-descent benchmarks: "
            f"{r['coordesc_bench_during_backward']}): the case proves nothing here"
        )
    compared = (
        f"backward after {r['coordesc_bench_during_backward']} coordinate-descent benchmarks in the recompute: "
        f"the gradients of x, w against eager (rtol {RTOL:g}, atol {ATOL:g}): max abs diff {r['max_grad_diff']:.3g}"
    )
    return observed(compared) if not r["grads_match"] else not_observed(compared)
