"""mix-order-view-write: Inductor's mix-order reduction writes into a buffer that is a view.

Background (pytorch/pytorch#193061, "module: correctness (silent)", high priority; fix PR #193103,
torch 2.15.0)
    Mix-order reduction (``triton.mix_order_reduction``, on by default outside fbcode since torch
    2.10) fuses a row reduction and a column reduction of the same input into one Triton kernel; the
    column reduction's partial sums go to a workspace, and ``SIMDScheduling._codegen_mix_order_reduction``
    (``torch/_inductor/codegen/simd.py``) finishes each of them in the wrapper with one line:
    ``bufN = ws[a : b].view(nsplit, rnumel).sum(dim=0)...``. That line *rebinds* the name ``bufN``.
    When the buffer's layout is an ``ir.NonOwningLayout`` (a view into another buffer's storage: the
    gradients of ``chunk()``-ed slices of one shared parameter, assembled into its gradient by
    ``cat``, as the adaLN ``scale_shift_table`` of DiT models such as Wan 2.1), the earlier
    ``bufN = reinterpret_tensor(bufM, ...)  # alias`` is dropped and that region of ``bufM`` is never
    written: the parameter's gradient holds uninitialised memory there, or the previous step's bytes
    when the allocator hands back the same block. No error. torch 2.10 (cited) to 2.14.1.

The fix (upstream's, PR #193103; 2.15.0 ``simd.py``:3579-3588)
    For a buffer whose output spec is an ``ir.NonOwningLayout``, the line written is
    ``V.graph.wrapper_code.codegen_allocation(buffer)`` (the alias, when not emitted yet) and then
    ``bufN.copy_(ws[a : b].view(...).sum(dim=0)...)``: the result is written *through* the view,
    and ``copy_`` casts from the float workspace (no ``.to(dtype)``). Every other buffer keeps the
    release's line. Patched where the line is made, not in the emitted text: the release's module
    source is recompiled with seven lines inserted before the dtype cast of the final-reduce loop (the
    buffer looked up, the branch, a comment, the allocation, the ``copy_`` line, a count,
    ``continue``) and the function's code object
    is swapped (:mod:`torchfix_core.sourcepatch`: the unchanged text must reproduce the running
    code first; ``PatchSet.swap_code``, so the class attribute and every subclass see it and revert
    is exact). The fix's effect is ``compiled``: torchfix-core keys the FX graph and AOTAutograd
    caches on it while it is applied, so a backward compiled and cached without the fix (its wrapper
    holds the rebinding line) is not reused.

    Not taken from 2.15.0: its ``else`` branch, which raises ``AssertionError`` for an output spec
    that is neither ``NonOwningLayout`` nor ``FixedLayout``/``FlexibleLayout`` (upstream made those
    fail to compile); the backport leaves them as the release compiles them.

Probe (live objects, no version check)
    ``SIMDScheduling._codegen_mix_order_reduction``'s code: ``NonOwningLayout`` among the names it
    uses is upstream's fix (2.15.0), or this fix applied by another copy (``not-needed``); without it,
    a torch without Triton (a CPU-only build) is ``not-needed``: Inductor generates no Triton kernel
    there, so no mix-order reduction, and the key term would only cost a cold cache (checked before
    the source is read: 0.2 s of compiling saved at the trigger's import). Then the release's
    final-reduce lines must be found, exactly once each, and the unchanged source must reproduce the
    running code, else ``PatchRefused``. A torch without mix-order reduction at all (no
    ``_codegen_mix_order_reduction`` and no ``scheduler.MixOrderReduction``: before 2.10) is
    ``not-needed``.

Hazards
    * Keys change once for every graph (a cold FX graph / AOTAutograd cache after installing the
      fix, CPU graphs included: the term does not ask whether a graph has a mix-order reduction).
    * ``copy_`` writes the reduction into the view after it was computed in a fresh tensor: one more
      small copy per such buffer (``[D]`` elements per chunk); 0.98x step time measured on an H100
      (docs/results/gpu/round4/).

Patch points (``torch/_inductor/codegen/simd.py``: ``def _codegen_mix_order_reduction``; the rebinding
``final_reduce = f"{buffer_name} = ..."``; the lines inserted before ``if (buffer_dtype := ...``):
2.11.0 :1645, :1781, :1784; 2.12.0 :1660, :1803, :1807; 2.13.0 :2352, :2489, :2504; 2.14.1 :2438,
:2581, :2596. Upstream's branch: 2.15.0 :3419, :3579-3588. 2.10.0 (:1624) writes the line inside
``writeline(f"...")`` with no ``final_reduce`` and no dtype cast: refused (unknown layout), and out of
the validated range.
"""

from __future__ import annotations

import importlib.util
import linecache
import types
from dataclasses import dataclass

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.sourcepatch import reproduced_source
from torchfix_core.tallies import counts_expression, tally_and_log

FIX_ID = "mix-order-view-write"
SIMD_MODULE = "torch._inductor.codegen.simd"
SCHEDULING = "SIMDScheduling"
METHOD = "_codegen_mix_order_reduction"
WHAT = f"{SCHEDULING}.{METHOD}"

#: ``view-written``: one wrapper line ``bufN.copy_(...)`` emitted for a mix-order reduction output
#: that is a view (``NonOwningLayout``), where the release would have rebound the name (per buffer,
#: per compile); ``key-changed``: an FX graph / AOTAutograd key computed with the fix's term
ACTED, log = tally_and_log(FIX_ID, "view-written", "key-changed")
COUNTS = ACTED.counts

#: the release's lines this fix needs, exactly once each in the function (stripped): the rebinding
#: line (its text starts with ``f"{buffer_name} = {ws_name}[``), the dtype cast (the insertion
#: point), the write and the bookkeeping that end the loop body
REBIND_PREFIX = 'final_reduce = f"{buffer_name} = {ws_name}['
CAST_LINE = "if (buffer_dtype := V.graph.get_dtype(buffer_name)) != torch.float:"
WRITE_LINE = "V.graph.wrapper_code.writeline(final_reduce)"
ALLOCATED_LINE = "V.graph.wrapper_code.allocated.add(buffer_name)"

#: what is inserted before :data:`CAST_LINE`, at its indentation (upstream's branch, PR #193103)
INSERTED = (
    "torchfix_buffer = V.graph.get_buffer(buffer_name)",
    "if isinstance(torchfix_buffer, ir.Buffer) and isinstance(torchfix_buffer.get_output_spec(), ir.NonOwningLayout):",
    "    # torchfix mix-order-view-write (pytorch PR #193103): write through the view, never rebind it",
    "    V.graph.wrapper_code.codegen_allocation(torchfix_buffer)",
    "    V.graph.wrapper_code.writeline(f\"{buffer_name}.copy_({final_reduce.split(' = ', 1)[1]})\")",
    f'    {counts_expression(__name__, "COUNTS")}["view-written"] += 1',
    "    continue",
)
FILENAME_PREFIX = f"<torchfix {FIX_ID}: "
#: the cache key term's detail: what the compiled wrapper does differently
KEY_DETAIL = "mix-order reduction outputs with a NonOwningLayout written with copy_ (pytorch PR #193103)"


@dataclass(frozen=True)
class Plan:
    """The patched code of ``func`` (compiled from ``lines`` under ``filename``) and the code it replaces."""

    func: types.FunctionType
    original: types.CodeType
    code: types.CodeType
    filename: str
    lines: tuple[str, ...]


def scheduling_class() -> type | None:
    """``SIMDScheduling`` of the imported simd module; None where this Inductor has no mix-order
    reduction (neither the method nor ``scheduler.MixOrderReduction``); PatchRefused on a layout
    with only one of them or no ``SIMDScheduling`` class."""
    simd = imported_module(SIMD_MODULE)
    cls = vars(simd).get(SCHEDULING)
    if not isinstance(cls, type):
        raise PatchRefused(f"{SIMD_MODULE}.{SCHEDULING} is {cls!r}, expected a class: unknown Inductor layout")
    scheduler = vars(simd).get("scheduler")
    has_mix_order = hasattr(scheduler, "MixOrderReduction")
    if METHOD not in vars(cls):
        if has_mix_order:
            raise PatchRefused(f"{WHAT} is missing but scheduler.MixOrderReduction exists: unknown Inductor layout")
        return None
    return cls


def method(cls: type) -> types.FunctionType:
    """``cls._codegen_mix_order_reduction``, a plain function (PatchRefused otherwise)."""
    func = vars(cls)[METHOD]
    if not isinstance(func, types.FunctionType):
        raise PatchRefused(f"{WHAT} is {func!r}, expected a function: unknown Inductor layout")
    return func


def writes_through_views(func: types.FunctionType) -> bool:
    """Whether the code of ``func`` tells ``NonOwningLayout`` outputs apart (upstream's fix, 2.15.0,
    or this fix's code)."""
    return "NonOwningLayout" in func.__code__.co_names


def _indices(lines: list[str], start: int, stop: int, text: str, *, prefix: bool = False) -> list[int]:
    """0-based indices in ``lines[start - 1 : stop - 1]`` whose stripped text is (or starts with) ``text``."""
    return [
        i
        for i in range(start - 1, stop - 1)
        if (lines[i].strip().startswith(text) if prefix else lines[i].strip() == text)
    ]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def plan(func: types.FunctionType) -> Plan:
    """The release's source of ``func`` with :data:`INSERTED` before the dtype cast of its
    final-reduce loop, compiled; PatchRefused where a line is missing or found twice, the loop body
    goes on after the bookkeeping line (``continue`` would skip it), or the source does not
    reproduce the running code."""
    ir = func.__globals__.get("ir")
    if not all(isinstance(getattr(ir, name, None), type) for name in ("Buffer", "NonOwningLayout")):
        raise PatchRefused(f"{WHAT}: its module has no ir.Buffer / ir.NonOwningLayout (unknown Inductor layout)")
    source = reproduced_source(func, what=WHAT)
    lines = list(source.lines)
    found = {}
    for key, text, prefix in (
        ("rebind", REBIND_PREFIX, True),
        ("cast", CAST_LINE, False),
        ("write", WRITE_LINE, False),
        ("allocated", ALLOCATED_LINE, False),
    ):
        at = _indices(lines, source.start, source.stop, text, prefix=prefix)
        if len(at) != 1:
            raise PatchRefused(f"{WHAT}: '{text}' occurs {len(at)} times, expected once (unknown layout)")
        found[key] = at[0]
    order = [found[k] for k in ("rebind", "cast", "write", "allocated")]
    if order != sorted(order):
        raise PatchRefused(f"{WHAT}: the final-reduce lines are not in the release's order (unknown layout)")
    cast = found["cast"]
    pad = _indent(lines[cast])
    if _indent(lines[found["rebind"]]) != pad or _indent(lines[found["allocated"]]) != pad:
        raise PatchRefused(f"{WHAT}: the final-reduce lines are not in one block (unknown layout)")
    after = next(
        (
            line
            for line in lines[found["allocated"] + 1 : source.stop - 1]
            if line.strip() and not line.lstrip().startswith("#")
        ),
        "",
    )
    if len(_indent(after)) >= len(pad):
        raise PatchRefused(f"{WHAT}: the final-reduce loop goes on after '{ALLOCATED_LINE}' (unknown layout)")
    patched = lines[:cast] + [pad + text + "\n" for text in INSERTED] + lines[cast:]
    filename = f"{FILENAME_PREFIX}{func.__code__.co_filename}>"
    code = source.recompile(patched, filename, what=WHAT)
    return Plan(func, func.__code__, code, filename, tuple(patched))


def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


class MixOrderViewWriteFix(Fix):
    """Mix-order reduction writes into ``NonOwningLayout`` outputs with ``copy_`` (see the module doc)."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self._plan: Plan | None = None  # the probe's, reused by apply() while the code is unchanged

    def probe(self) -> ProbeResult:
        cls = scheduling_class()
        if cls is None:
            return ProbeResult(False, f"{SIMD_MODULE} has no mix-order reduction (torch 2.9 and older)")
        func = method(cls)
        if writes_through_views(func):
            return ProbeResult(
                False,
                f"{WHAT} writes NonOwningLayout outputs through the view (upstream PR #193103, torch 2.15+, or "
                "this fix applied by another copy)",
            )
        if not _triton_installed():
            return ProbeResult(False, "Triton is not installed: Inductor generates no mix-order reduction here")
        self._plan = plan(func)
        return ProbeResult(
            True,
            f"{WHAT} rebinds the name of a reduction output that is a view (NonOwningLayout) instead of writing "
            "into it: that region of the viewed buffer is never written (pytorch#193061)",
        )

    def apply(self) -> None:
        cls = scheduling_class()
        if cls is None:
            raise PatchRefused(f"{SIMD_MODULE} has no mix-order reduction")
        func = method(cls)
        found = self._plan
        if found is None or found.func is not func or func.__code__ is not found.original:
            found = plan(func)
        text = "".join(found.lines)
        linecache.cache[found.filename] = (len(text), None, list(found.lines), found.filename)
        self.patches.swap_code(func, found.code, signature=("self", "node1", "node2"))
        log.debug("%s: %s writes NonOwningLayout outputs with copy_ (the compile caches keyed on it)", FIX_ID, WHAT)

    def cache_key_detail(self) -> str:
        """What the compiled wrapper does differently, for the compile caches' key term; counts
        ``key-changed``."""
        COUNTS["key-changed"] += 1
        return KEY_DETAIL
