"""inductor-rand4x-dropout's reproduction (``FixSpec.reproduction``: :func:`rand4x_dropout`), and the
measurement behind it (:func:`measure`), which the package's GPU test, its demo and
``benchmarks/inductor_rand4x_step.py`` run too.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's GPU what the package's GPU
test runs; imported only when a reproduction runs (it imports torch inside its functions).

The case (pytorch#198333): compiled dropout (p = 0.5) of ``x.transpose(1, 2).contiguous()`` with ``x``
a ``(8, 64, 4096)`` float32 tensor of ones on the current CUDA device, seed 0. The input is ones, so
the output reads the mask exactly (``2.0`` kept, ``0`` dropped); under checkpointing, with an upstream
gradient of ones, ``x.grad`` reads the mask the backward used the same way.

* Part A (no checkpoint): the forward mask's statistics: the keep rate (and its distance from 0.5 in
  standard errors of an independent mask), and how often adjacent elements of the last dimension
  agree inside a group of four (indices ``4k .. 4k+3``) and across a group boundary. An independent
  mask agrees about half the time in both; ``rand4x`` over strided offsets repeats the mask in
  groups of four (agreement near 1 inside a group).
* Part B (``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` inside the compiled
  function, forward and backward): the fraction of mask elements that differ between the forward's
  mask and the mask the backward used (the recompute's), and the largest gradient error against the
  gradient of the forward's mask.

Both parts count ``rand4x(`` and ``tl.rand(`` in the code Inductor generated. Each is compiled with
``dynamic=False`` at one shape: on torch 2.11 a second compile of the same function at another shape
(automatic dynamic shapes) stopped in the partitioner (``Node permute_1 was invalid, but is output``,
docs/results/gpu/round4). A part that still fails to compile is reported with its error, never
taken for a clean result: where neither part ran, the reproduction broke.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from torchfix_core.reproduction import Outcome, cannot_run, compile_caches_off, not_observed, observed, triton_version

if TYPE_CHECKING:
    import torch

P = 0.5
#: (batch, time, channels) of the input; dropout sees its (batch, channels, time) contiguous copy
SHAPE = (8, 64, 4096)
#: adjacent-element agreement inside groups of four above agreement across them by more than this is
#: the 4x repetition (an independent mask: equal up to ~0.001 at this size; the 4x path: ~0.5)
REPEAT_MARGIN = 0.1


def dropout_of_transposed(x: torch.Tensor) -> torch.Tensor:
    """Dropout of a materialised layout change: the issue's case."""
    import torch

    return torch.nn.functional.dropout(x.transpose(1, 2).contiguous(), p=P, training=True)


def checkpointed(x: torch.Tensor) -> torch.Tensor:
    """:func:`dropout_of_transposed` under non-reentrant activation checkpointing."""
    from torch.utils.checkpoint import checkpoint

    out: torch.Tensor = checkpoint(dropout_of_transposed, x, use_reentrant=False)
    return out


def mask_stats(mask: torch.Tensor) -> dict[str, float]:
    """Keep rate (and z against an independent mask of keep probability ``1 - P``), and the agreement
    of adjacent elements of the last dimension inside groups of four and across their boundaries."""
    import torch

    keep = mask.float().mean().item()
    q = 1.0 - P
    z = (keep - q) / math.sqrt(q * (1.0 - q) / mask.numel())
    agree = mask[..., :-1] == mask[..., 1:]
    index = torch.arange(mask.shape[-1] - 1, device=mask.device)
    within = agree[..., index % 4 != 3].float().mean().item()
    across = agree[..., index % 4 == 3].float().mean().item()
    return {
        "keep_rate": round(keep, 5),
        "keep_z": round(z, 1),
        "agree_within4": round(within, 4),
        "agree_across4": round(across, 4),
    }


def repeats_in_fours(stats: dict[str, float]) -> bool:
    """The mask repeats in groups of four (adjacent agreement inside a group well above across)."""
    return stats["agree_within4"] - stats["agree_across4"] > REPEAT_MARGIN


def _code_counts(codes: list[str]) -> dict[str, int]:
    return {
        "rand4x": sum(code.count("rand4x(") for code in codes),
        "tl_rand": sum(code.count("tl.rand(") for code in codes),
    }


def _error(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:300]}"


def part_a(device: str = "cuda") -> dict[str, Any]:
    """Part A of the module doc: the compiled forward without checkpointing."""
    import torch
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(dropout_of_transposed, dynamic=False)
    torch.manual_seed(0)
    x = torch.ones(SHAPE, device=device)
    y, codes = run_and_get_code(compiled, x)
    return {"mask": mask_stats(y != 0), "code": _code_counts(list(codes))}


def part_b(device: str = "cuda") -> dict[str, Any]:
    """Part B of the module doc: forward and backward of the compiled checkpointed dropout."""
    import torch
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(checkpointed, dynamic=False)
    torch.manual_seed(0)
    x = torch.ones(SHAPE, device=device, requires_grad=True)

    def forward_backward() -> torch.Tensor:
        y = compiled(x)
        y.backward(torch.ones_like(y))
        return y

    y, codes = run_and_get_code(forward_backward)
    assert x.grad is not None
    forward_mask = y.detach() != 0
    backward_mask = x.grad.transpose(1, 2) != 0
    reference = (forward_mask.float() / (1.0 - P)).transpose(1, 2)
    return {
        "forward_mask": mask_stats(forward_mask),
        "backward_mask": mask_stats(backward_mask),
        "mask_differ_fraction": round((forward_mask != backward_mask).float().mean().item(), 6),
        "elements": forward_mask.numel(),
        "max_grad_error": float((x.grad - reference).abs().max().item()),
        "code": _code_counts(list(codes)),
    }


def measure(device: str = "cuda") -> dict[str, Any]:
    """Parts A and B on the current CUDA device (``device``: another, for a dry run of the plumbing), under the compile-cache settings in effect (the
    package's GPU test turns the FX graph cache on in a directory of its own), each caught: a part
    that raised has ``error`` instead of its figures. Plus the versions and the device."""
    import torch
    import torch._dynamo

    result: dict[str, Any] = {
        "torch": torch.__version__,
        "triton": triton_version(),
        "device": torch.cuda.get_device_name() if device == "cuda" else device,
    }
    for name, part in (("a", part_a), ("b", part_b)):
        torch._dynamo.reset()
        try:
            result[name] = part(device)
        except Exception as exc:  # noqa: BLE001 - reported, and judged by the caller (see rand4x_dropout)
            result[name] = {"error": _error(exc)}
    torch._dynamo.reset()
    return result


def harm(result: dict[str, Any]) -> dict[str, Any]:
    """What :func:`measure` found, judged: ``repeats`` (part A's mask, or part B's forward mask, repeats
    in groups of four), ``differs`` (part B's forward and recompute masks differ), ``ran`` (parts
    that produced figures) and ``errors``."""
    a, b = result["a"], result["b"]
    ran = [name for name in ("a", "b") if "error" not in result[name]]
    repeats = ("a" in ran and repeats_in_fours(a["mask"])) or ("b" in ran and repeats_in_fours(b["forward_mask"]))
    differs = "b" in ran and b["mask_differ_fraction"] > 0
    errors = {name: result[name]["error"] for name in ("a", "b") if name not in ran}
    return {"repeats": repeats, "differs": differs, "ran": ran, "errors": errors}


def _cannot_run_why() -> str:
    """What this machine lacks for the case ("" when it can run it)."""
    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA GPU: the 4x random path is in Inductor's CUDA Triton kernels"
    if triton_version() is None:
        return "Triton is not installed: Inductor compiles CUDA kernels with it"
    return ""


def _describe(result: dict[str, Any], judged: dict[str, Any]) -> tuple[str, str]:
    parts = []
    if "b" in judged["ran"]:
        b = result["b"]
        parts.append(
            f"checkpointed forward and recompute masks differ in {b['mask_differ_fraction']:.2%} of {b['elements']:,} "
            f"dropout elements (max gradient error {b['max_grad_error']:g})"
        )
    if "a" in judged["ran"]:
        m = result["a"]["mask"]
        parts.append(
            f"forward mask without checkpoint: adjacent elements agree {m['agree_within4']:.1%} within groups of "
            f"four vs {m['agree_across4']:.1%} across, keep rate {m['keep_rate']:.4f} (z {m['keep_z']:+.1f})"
        )
    for name, error in judged["errors"].items():
        parts.append(f"part {name.upper()} did not run: {error}")
    codes = {name: result[name]["code"] for name in judged["ran"]}
    code = "; ".join(
        f"part {name.upper()} code: {c['rand4x']} rand4x( / {c['tl_rand']} tl.rand(" for name, c in codes.items()
    )
    detail = f"torch {result['torch']}, Triton {result['triton']}, {result['device']}; {code}"
    return "; ".join(parts), detail


def rand4x_dropout() -> Outcome:
    """inductor-rand4x-dropout's reproduction (pytorch#198333): :func:`measure` with the compile caches
    off (everything compiled here). Observed where the checkpointed forward and recompute masks
    differ or a forward mask repeats in groups of four (the measure: the fraction of mask elements
    differing, the group-of-four agreement, the keep rate); not observed where neither. Cannot run
    without a CUDA GPU or Triton. A part that did not compile is reported; where neither part ran,
    or only part A ran and showed nothing, the reproduction broke (raised)."""
    why = _cannot_run_why()
    if why:
        return cannot_run(why)
    with compile_caches_off():
        result = measure()
    judged = harm(result)
    measure_text, detail = _describe(result, judged)
    if judged["repeats"] or judged["differs"]:
        return observed(measure_text, detail)
    if "b" not in judged["ran"]:
        raise RuntimeError(f"the checkpointed case did not run and the forward showed nothing: {measure_text}")
    return not_observed(measure_text, detail)
