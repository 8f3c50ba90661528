"""mix-order-view-write's reproduction (``FixSpec.reproduction``: :func:`mix_order_view_write`), and
the case behind it (:func:`case`), which the package's GPU tests, demo and benchmark run too.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's GPU what the package's GPU
test runs; imported only when a reproduction runs (it imports torch inside its functions).

The case (pytorch/pytorch#193061): one shared table ``[1, 4, D]`` (a parameter) is ``chunk()``-ed
into two scales and two shifts that modulate two chained LayerNorms of ``x [1, S, D]``
(``layer_norm(x) * (1 + scale) + shift``, twice), as the adaLN ``scale_shift_table`` of DiT models
(diffusers Wan 2.1, the reporter's) does. The table's gradient is the ``cat`` of the four chunks'
gradients, each a column reduction over the ``S`` rows; at ``S = 16384, D = 2048`` Inductor fuses
them with the row reductions of the LayerNorm backward (mix-order reduction), and each chunk's
gradient is a view (``NonOwningLayout``) into the table's gradient buffer. Three steps, each with
fresh ``x`` and upstream gradient; per step and chunk, the compiled gradient's max abs error
against a float64 eager reference, and the eager float32 gradient's error against the same
reference (the floor: what a correct float32 gradient misses by). On an H100 with torch 2.11.0
(docs/results/gpu/round4/) chunks 3 and 4 were never written: float32 max abs error 430 (NaN in
the first steps), relative error 0.707; with the fix every chunk was at the floor (about 7e-5).
"""

from __future__ import annotations

import math
from typing import Any

from torchfix_core.reproduction import Outcome, cannot_run, compile_caches_off, not_observed, observed

#: rows and width of ``x``: large enough for mix-order reduction's size gates
SEQ, DIM = 16384, 2048
CHUNKS, STEPS = 4, 3
#: a chunk is wrong when its error is this many times the eager float32 floor (and over ``ATOL``)
FACTOR, ATOL = 100.0, 1e-3


def modulated_norms(x: Any, table: Any) -> Any:
    """Two LayerNorms of ``x`` modulated by the chunks of one shared ``table`` (adaLN)."""
    import torch

    s1, b1, s2, b2 = table.chunk(CHUNKS, dim=1)
    h = torch.nn.functional.layer_norm(x, (x.shape[-1],)) * (1 + s1) + b1
    return torch.nn.functional.layer_norm(h, (h.shape[-1],)) * (1 + s2) + b2


def _grad(param: Any) -> Any:
    """``param.grad``; RuntimeError (the reproduction broke) when the backward did not reach it."""
    grad = param.grad
    if grad is None:
        raise RuntimeError("the backward left no gradient on the table")
    return grad


def _chunk_errors(grad: Any, ref: Any) -> list[float]:
    d = (grad.double() - ref).abs()
    return [float(d[0, i].max().item()) for i in range(CHUNKS)]


def mix_order_kernels() -> int | None:
    """Inductor's count of mix-order reduction kernels generated in this process (None: no counter)."""
    from torch._inductor import metrics

    value = getattr(metrics, "codegen_mix_order_reduction", None)
    return None if value is None else int(value)


def case(
    dtype_name: str = "float32", seq: int = SEQ, dim: int = DIM, steps: int = STEPS, device: str = "cuda"
) -> dict[str, Any]:
    """The case of the module docstring on the current CUDA device (``device``: another one, for a
    dry run), under the compile caches' settings in effect. Returns per step and chunk the compiled and the eager float32 max abs
    errors against float64 (``errors``, ``floor``), the relative error of the whole gradient per
    step (``relative``), the chunks wrong in any step (``wrong``, 1-based), those non-finite in any
    step, those bitwise equal to the previous step's compiled chunk (``stale``), the mix-order
    kernels generated, the versions and the device."""
    import torch
    import torch._dynamo

    dtype = getattr(torch, dtype_name)
    torch._dynamo.reset()
    before = mix_order_kernels()
    compiled = torch.compile(modulated_norms)
    torch.manual_seed(0)
    table = torch.nn.Parameter(torch.randn(1, CHUNKS, dim, device=device, dtype=dtype) / dim**0.5)
    errors, floor, relative, nonfinite, stale = [], [], [], set(), set()
    previous = None
    for _ in range(steps):
        x = torch.randn(1, seq, dim, device=device, dtype=dtype)
        go = torch.randn(1, seq, dim, device=device, dtype=dtype)
        t64 = table.detach().double().requires_grad_(True)
        modulated_norms(x.double(), t64).backward(go.double())
        ref = _grad(t64)
        t32 = table.detach().clone().requires_grad_(True)
        modulated_norms(x, t32).backward(go)
        floor.append(_chunk_errors(_grad(t32), ref))
        table.grad = None
        compiled(x, table).backward(go)
        if device == "cuda":
            torch.cuda.synchronize()
        grad = _grad(table).detach().clone()
        errors.append(_chunk_errors(grad, ref))
        d = (grad.double() - ref).abs()
        relative.append(float((d.norm() / ref.norm()).item()))
        for i in range(CHUNKS):
            if not bool(torch.isfinite(grad[0, i]).all()):
                nonfinite.add(i + 1)
            if previous is not None and torch.equal(grad[0, i], previous[0, i]):
                stale.add(i + 1)
        previous = grad
    limit = max(FACTOR * max(max(step) for step in floor), ATOL)
    wrong = sorted({i + 1 for step in errors for i, e in enumerate(step) if not e <= limit})  # NaN is wrong
    after = mix_order_kernels()
    return {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device == "cuda" else device,
        "dtype": dtype_name,
        "shape": [1, seq, dim],
        "errors": errors,
        "floor": floor,
        "limit": limit,
        "relative": relative,
        "wrong": wrong,
        "nonfinite": sorted(nonfinite),
        "stale": sorted(stale),
        "mix_order_kernels": None if before is None or after is None else after - before,
    }


def _cannot_run_why() -> str:
    """What this machine lacks for the case ("" when it can run it)."""
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA GPU: mix-order reduction is a fusion of Inductor's Triton backend"
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed: Inductor compiles GPU kernels with it"
    return ""


def worst(values: list[float]) -> float:
    """The largest of ``values``, NaN when any is NaN."""
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def mix_order_view_write() -> Outcome:
    """mix-order-view-write's reproduction (pytorch#193061): :func:`case` in float32 with the compile
    caches off (compiled here, never read from a cache). The bug observed where a chunk of the
    table's gradient is far from the float64 reference (over :data:`FACTOR` times eager float32's
    error, or non-finite) in any step: the measure names those chunks (never written), the per-chunk
    max abs errors and the worst relative error; not observed where every chunk is at eager's
    error. Cannot run without a CUDA GPU or Triton."""
    why = _cannot_run_why()
    if why:
        return cannot_run(why)
    with compile_caches_off():
        r = case()
    per_chunk = ", ".join(_fmt(worst([step[i] for step in r["errors"]])) for i in range(CHUNKS))
    detail = (
        f"torch {r['torch']}, {r['device']}; {r['dtype']} x {r['shape']}, {STEPS} steps; mix-order reduction "
        f"kernels generated: {r['mix_order_kernels']}; eager float32 error (floor) up to "
        f"{_fmt(max(max(s) for s in r['floor']))}"
    )
    if not r["wrong"]:
        return not_observed(
            f"the compiled table gradient against float64, per chunk: max abs error {per_chunk} (limit "
            f"{_fmt(r['limit'])}), relative error up to {_fmt(worst(r['relative']))}: every chunk written",
            detail,
        )
    chunks = ", ".join(str(i) for i in r["wrong"])
    extra = []
    if r["nonfinite"]:
        extra.append(f"non-finite in chunks {', '.join(map(str, r['nonfinite']))}")
    if r["stale"]:
        extra.append(f"the previous step's bytes in chunks {', '.join(map(str, r['stale']))}")
    return observed(
        f"{len(r['wrong'])} of {CHUNKS} chunks of the table gradient never written (chunks {chunks}): per chunk "
        f"max abs error {per_chunk} against float64 (limit {_fmt(r['limit'])}), relative error up to "
        f"{_fmt(worst(r['relative']))}" + (f"; {'; '.join(extra)}" if extra else ""),
        detail,
    )
