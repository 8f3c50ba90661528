"""Backport of TransformerEngine PR #3394 (after TE 2.19.0; in TE 2.20.2) to TE 2.18-2.19.

FP8 delayed-scaling recompute metadata must be paired per module: every delayed-scaling module that
runs in the first forward of an FP8 activation-recompute region stashes its scale and amax history
(``copy_forward_fp8_meta_tensors_for_recompute``), and the recompute forward pops exactly that stash
(``get_old_fp8_meta_tensors_for_recompute``, a per-module FIFO). TE 2.18-2.19 break the pairing two
ways:

1. ``TransformerEngineBaseModule.prepare_forward`` (``module/base.py``) stashes only
   ``if self.training and is_fp8_activation_recompute_enabled()``, but the recompute restores
   whenever the module runs in the recompute phase with FP8. A module in ``eval()`` under
   ``te.checkpoint`` never stashes: its recompute raises ``KeyError:
   'global_fp8_buffer_pos_fwd_recompute'`` (first use), ``IndexError: pop from an empty deque``
   (after a training step), or pops a stash left by another forward (stale scale, silent).
2. A checkpoint that no backward can reach still enters the recompute region's first phase: under
   ``torch.no_grad()`` (reentrant and non-reentrant), or reentrant with no input requiring grad.
   Every such call leaves one stash per module (and, reentrant, one ``is_first_fp8_module`` entry)
   that nothing consumes: they pile up (memory), and the next real recompute pops the oldest,
   i.e. the scale of an unrelated forward (silent). An ineligible checkpoint nested in a recompute
   also resets the enclosing region's flags on exit.

The fix, as upstream, in three functions (``PatchSet.swap_code`` of each one's code object, so every
binding of the function object, e.g. ``te.checkpoint``, sees it):

* ``module/base.py`` ``TransformerEngineBaseModule.prepare_forward``: the stash condition loses
  ``self.training and``: every module seen in the first phase stashes, every one in the recompute
  consumes.
* ``distributed.py`` ``_CheckpointFunction.forward``: ``run_function`` runs inside
  ``activation_recompute_forward(activation_recompute=True, recompute_phase=False)`` only when
  ``any(ctx.needs_input_grad)``; otherwise the enclosing region state is inherited (upstream uses a
  ``nullcontext``, which TE 2.18's ``distributed.py`` does not import: the backport writes the same
  logic as an ``if``/``else``).
* ``distributed.py`` ``checkpoint`` (the function ``torch._disable_dynamo`` wraps): entered with
  autograd disabled, it runs ``function`` directly under the user's ``context_fn()`` forward context
  (no recompute can ever happen), right after its native-``torch.utils.checkpoint`` fallback.

How (the steps of :mod:`torchfix_core.sourcepatch`): the text of each function's module file
(``linecache``, i.e. the ``.py`` file TE was imported from) is compiled unchanged and must reproduce
each live code object exactly (bytecode, names, constants, flags), so the text on disk is the code
that runs; then each hunk's original lines, matched exactly and once inside its function, are
replaced and the whole module text is compiled again (whole-module compiles: CPython's code
generation depends on module-level facts such as names bound by imports). Only the three new
function code objects are used; they keep the originals' names, qualified names and free variables
(none) and run with TE's module globals. Their filename is
``<torchfix fp8-recompute-pairing: <TE file>>``, registered with ``linecache`` so tracebacks show
the patched lines. The probe does this work once (about 0.1-0.2 s: two module compiles per file) and
``apply`` reuses it. The probe refuses (nothing patched) when a source is missing, does not
reproduce the live code, lacks a hunk's lines, or the patched code reads a global the module lacks.

Counting (``torchfix_core.report()``): each patched function also counts, on the lines where it
acts only, through a line added to its text (visible in tracebacks): ``kept-eval-module-state``
(a module in ``eval()`` kept its scale/amax for the recompute: TE 2.18-2.19 skipped it),
``inherited-region-without-grad-inputs`` (a reentrant checkpoint no backward can reach ran in the
enclosing region) and ``ran-no-grad-checkpoint-directly`` (``te.checkpoint`` under ``no_grad``
ran the function directly, stashing nothing). The line reaches the tally through
:func:`torchfix_core.tallies.counts_expression` (the patched code runs with TE's globals, which
torchfix does not touch): one ``sys.modules`` lookup and one increment, never on a training
module's path.

Hazards: the stash condition change makes ``eval()`` modules under ``te.checkpoint`` with FP8 keep
their stash until the recompute (one scale/amax copy per module, as for training modules). A
checkpoint run under ``no_grad`` no longer goes through ``_CheckpointFunction`` / the non-reentrant
frame at all (as upstream). Independent of ``fp8-recompute`` (TE PR #3284, TE <= 2.18), which patches
other functions; on TE 2.18 a callable opening its own autocast needs both.

Upstream: https://github.com/NVIDIA/TransformerEngine/pull/3394
"""

from __future__ import annotations

import builtins
import dis
import linecache
import types
from dataclasses import dataclass
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module, nested_code, same_code
from torchfix_core.sourcepatch import code_at, compile_module, module_source, source_span
from torchfix_core.tallies import counts_expression, tally_and_log

DIST = "transformer_engine.pytorch.distributed"
BASE = "transformer_engine.pytorch.module.base"
FIX_ID = "fp8-recompute-pairing"
FILENAME_PREFIX = f"<torchfix {FIX_ID}: "

ACTED, log = tally_and_log(
    FIX_ID, "kept-eval-module-state", "inherited-region-without-grad-inputs", "ran-no-grad-checkpoint-directly"
)
COUNTS = ACTED.counts
#: how the patched TE code reaches :data:`COUNTS`: it runs with TE's module globals, so through the
#: builtin ``__import__`` (a ``sys.modules`` hit), on the lines where the fix acts only
_COUNT = counts_expression(__name__)


@dataclass(frozen=True)
class Hunk:
    """One function of TE PR #3394: where it lives, the lines replaced, and the upstream marker."""

    module: str
    path: str  # display path, relative to the module
    resolve: Callable[[types.ModuleType], Any]  # module -> the plain function object
    old: tuple[str, ...]  # lines, indentation relative to the first one
    new: tuple[str, ...]
    fixed: Callable[[types.CodeType], bool]  # does the live code already carry the upstream change?


def _prepare_forward(base: types.ModuleType) -> Any:
    cls = getattr(base, "TransformerEngineBaseModule", None)
    return cls.__dict__.get("prepare_forward") if isinstance(cls, type) else None


def _checkpoint_forward(dist: types.ModuleType) -> Any:
    cls = getattr(dist, "_CheckpointFunction", None)
    raw = cls.__dict__.get("forward") if isinstance(cls, type) else None
    return raw.__func__ if isinstance(raw, staticmethod) else None


def _checkpoint(dist: types.ModuleType) -> Any:
    """``distributed.checkpoint`` is ``torch._disable_dynamo(checkpoint)``: the function inside."""
    outer = getattr(dist, "checkpoint", None)
    return getattr(outer, "__wrapped__", outer)


HUNKS: tuple[Hunk, ...] = (
    Hunk(
        BASE,
        "TransformerEngineBaseModule.prepare_forward",
        _prepare_forward,
        old=("if self.training and is_fp8_activation_recompute_enabled():",),
        new=(
            "if is_fp8_activation_recompute_enabled():",
            "    if not self.training:  # TE <= 2.19 skipped this stash",
            f"        {_COUNT}['kept-eval-module-state'] += 1",
        ),
        # upstream's code reads no self.training; torchfix's copy reads it for the count only
        fixed=lambda code: "training" not in code.co_names or code.co_filename.startswith(FILENAME_PREFIX),
    ),
    Hunk(
        DIST,
        "_CheckpointFunction.forward",
        _checkpoint_forward,
        old=(
            "with torch.no_grad(), forward_ctx:",
            "    with activation_recompute_forward(activation_recompute=True, recompute_phase=False):",
            "        outputs = run_function(*args, **kwargs)",
        ),
        new=(
            "with torch.no_grad(), forward_ctx:",
            "    # An ineligible nested checkpoint must inherit an enclosing recompute phase.",
            "    if any(ctx.needs_input_grad):",
            "        with activation_recompute_forward(activation_recompute=True, recompute_phase=False):",
            "            outputs = run_function(*args, **kwargs)",
            "    else:",
            f"        {_COUNT}['inherited-region-without-grad-inputs'] += 1",
            "        outputs = run_function(*args, **kwargs)",
        ),
        fixed=lambda code: "needs_input_grad" in code.co_names,
    ),
    Hunk(
        DIST,
        "checkpoint",
        _checkpoint,
        old=("from .module.base import TransformerEngineBaseModule",),
        new=(
            "# When checkpoint is entered with autograd disabled, run the forward directly",
            "# to avoid unreachable FP8 recompute state. Preserve the forward context.",
            "if not torch.is_grad_enabled():",
            f"    {_COUNT}['ran-no-grad-checkpoint-directly'] += 1",
            "    forward_ctx, _ = context_fn()",
            "    with forward_ctx:",
            "        return function(*args, **kwargs)",
            "",
            "from .module.base import TransformerEngineBaseModule",
        ),
        fixed=lambda code: "is_grad_enabled" in code.co_names,
    ),
)


def _module(name: str) -> types.ModuleType:
    return imported_module(name)  # the registry applies us only once both triggers are imported


def _function(hunk: Hunk) -> types.FunctionType:
    func = hunk.resolve(_module(hunk.module))
    if not isinstance(func, types.FunctionType):
        raise PatchRefused(f"{hunk.module}.{hunk.path} is not a plain Python function (unknown TE layout)")
    return func


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _replace(lines: list[str], hunk: Hunk) -> list[str]:
    """``lines`` with the hunk's old lines (exact text, relative indentation) replaced once."""
    n = len(hunk.old)
    rel = [_indent(o) for o in hunk.old]
    matches = []
    for i in range(len(lines) - n + 1):
        window = lines[i : i + n]
        if [w.strip() for w in window] != [o.strip() for o in hunk.old]:
            continue
        base = _indent(window[0])
        if [_indent(w) - base for w in window] == rel:
            matches.append(i)
    if len(matches) != 1:
        raise PatchRefused(
            f"{hunk.module}.{hunk.path}: the lines {hunk.old[0]!r}... occur {len(matches)} times, expected once"
        )
    i = matches[0]
    pad = " " * _indent(lines[i])
    new = [(pad + line if line else "") + "\n" for line in hunk.new]
    return lines[:i] + new + lines[i + n :]


def _loaded_globals(code: types.CodeType) -> set[str]:
    """Global names ``code`` and the code nested in it load."""
    names = {
        ins.argval
        for inner in nested_code(code)
        for ins in dis.get_instructions(inner)
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    return {n for n in names if isinstance(n, str)}


@dataclass
class _Plan:
    hunk: Hunk
    func: types.FunctionType
    original: types.CodeType
    code: types.CodeType
    filename: str
    lines: list[str]


def _plans() -> list[_Plan]:
    """Validate every function and build the patched code objects (no side effects).

    Per module file: the unchanged text must reproduce each live code object; all of that file's
    hunks are then applied to one text (registered for tracebacks under one filename), compiled once.
    """
    groups: dict[str, list[tuple[Hunk, types.FunctionType]]] = {}
    for hunk in HUNKS:
        func = _function(hunk)
        groups.setdefault(func.__code__.co_filename, []).append((hunk, func))
    plans: list[_Plan] = []
    for filename, items in groups.items():
        lines = module_source(items[0][1])
        unchanged = compile_module(lines, filename)
        spans = []
        for hunk, func in items:
            start, stop = source_span(func)
            if not same_code(code_at(unchanged, func, start), func.__code__):
                raise PatchRefused(
                    f"{hunk.module}.{hunk.path}: its source file does not reproduce the running code "
                    "(edited, stale or generated source); unknown TE layout"
                )
            spans.append((start, stop, hunk, func))
        spans.sort(key=lambda span: span[0])
        patched: list[str] = []
        starts: list[int] = []
        pos = 1
        for start, stop, hunk, _ in spans:
            if start < pos:
                raise PatchRefused(f"{hunk.module}.{hunk.path}: overlaps another patched function")
            patched += lines[pos - 1 : start - 1]
            starts.append(len(patched) + 1)
            patched += _replace(lines[start - 1 : stop - 1], hunk)
            pos = stop
        patched += lines[pos - 1 :]
        pseudo = f"{FILENAME_PREFIX}{filename}>"
        module_code = compile_module(patched, pseudo)
        for (_, _, hunk, func), start in zip(spans, starts):
            code = code_at(module_code, func, start)
            if code.co_freevars != func.__code__.co_freevars:
                raise PatchRefused(f"{hunk.module}.{hunk.path}: the patched code has other free variables")
            missing = sorted(n for n in _loaded_globals(code) if n not in func.__globals__ and not hasattr(builtins, n))
            if missing:
                raise PatchRefused(f"{hunk.module}.{hunk.path}: the patched code needs globals {missing} that TE lacks")
            plans.append(_Plan(hunk, func, func.__code__, code, pseudo, patched))
    return plans


class Fp8RecomputePairingFix(Fix):
    """Stash for every module of the first phase, and only where a backward can recompute (TE PR #3394)."""

    def probe(self) -> ProbeResult:
        codes = [(hunk, _function(hunk).__code__) for hunk in HUNKS]
        ours = [h.path for h, c in codes if c.co_filename.startswith(FILENAME_PREFIX)]
        if len(ours) == len(HUNKS):
            return ProbeResult(False, "the TE PR #3394 change is already in place (another copy of this fix)")
        fixed = [h.path for h, c in codes if h.fixed(c)]
        if len(fixed) == len(HUNKS):
            return ProbeResult(
                False,
                "TE carries the upstream fix (PR #3394): prepare_forward stashes regardless of "
                "self.training, _CheckpointFunction.forward checks ctx.needs_input_grad, checkpoint "
                "checks torch.is_grad_enabled()",
            )
        if fixed:
            raise PatchRefused(f"TE has part of PR #3394 ({', '.join(fixed)}): unknown TE layout")
        self._plans = _plans()
        return ProbeResult(
            True,
            "prepare_forward stashes FP8 recompute state only if self.training (the recompute "
            "restores regardless), and te.checkpoint stashes where no backward can recompute",
        )

    _plans: list[_Plan] | None = None

    def apply(self) -> None:
        plans = self._plans  # the probe's, while TE's code objects are still the ones it checked
        if not plans or any(p.func.__code__ is not p.original for p in plans):
            plans = _plans()  # all validated before the first change
        for plan in plans:
            text = "".join(plan.lines)
            linecache.cache[plan.filename] = (len(text), None, plan.lines, plan.filename)
            self.patches.swap_code(plan.func, plan.code)
        log.debug("patched %s", ", ".join(f"{p.hunk.module}.{p.hunk.path}" for p in plans))
