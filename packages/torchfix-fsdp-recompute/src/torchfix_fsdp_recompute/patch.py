"""The two fixes at ``FSDPState._pre_forward``: an activation checkpoint recompute of an FSDP2 module.

Background
    ``fully_shard`` registers ``state._pre_forward`` / ``state._post_forward`` (bound methods) as the
    module's forward pre-/post-hooks. When ``torch.utils.checkpoint`` (non-reentrant) or the
    composable ``checkpoint`` recomputes the module in backward, the hooks run again while the
    state is ``TrainingState.PRE_BACKWARD`` (set by the pre-backward hook, which also unshards the
    parameters), and both return at once: "the pre-backward hook is responsible for the unshard".

fsdp-recompute-cast (pytorch/pytorch#159359; upstream PR #182580, torch 2.13)
    That early return skips the ``MixedPrecisionPolicy`` casts of the forward: ``param_dtype`` on
    floating inputs (``cast_forward_inputs``) and ``output_dtype`` on the outputs. With the call of
    a ``fully_shard``-ed module wrapped in a checkpoint (Hugging Face ``gradient_checkpointing_enable()``
    and most fine-tuning stacks) and an fp32 module input, the forward runs in bf16 and the
    recompute in fp32 against bf16 parameters: ``RuntimeError: mat1 and mat2 must have the same
    dtype, but got Float and BFloat16``, or ``CheckpointError`` (recomputed metadata differs) when
    the dtype only differs further down. torch 2.8.0-2.12.1. Upstream factored the casts into
    ``_cast_forward_inputs`` / ``_cast_output_dtype`` and returns through them in PRE_BACKWARD too;
    this fix does the same casts (same code: ``_cast_fp_tensor`` through ``_apply_to_tensors``, same
    profiler ranges) after the original hook returns in PRE_BACKWARD. Upstream did not replay the
    root's move of inputs to the device (closed PR #176650 did); neither does this fix.

fsdp-recompute-unshard (pytorch/pytorch#153354, #187437; upstream PR #171779, torch 2.11)
    Nested ``fully_shard`` + checkpoint + two forwards before one backward (DPO, contrastive
    losses, policy + reference): the child's post-backward reshards its parameters during the
    backward of the first recompute; the second recompute enters ``_pre_forward`` in PRE_BACKWARD,
    returns at once and runs on the sharded DTensor parameters: ``RuntimeError: aten.addmm.default
    got mixed torch.Tensor and DTensor``. torch 2.8.0-2.10.0. This fix gives ``_pre_forward`` the
    lines upstream added (unshard and wait when ``not self._fsdp_param_group.is_unsharded``, before
    the early return), in the code torch runs, and one more line in that branch counting the unshard
    for ``torchfix_core.report()`` (:data:`COUNT_LINE`): the module source is recompiled with them
    (:mod:`torchfix_core.sourcepatch`, the unchanged text must reproduce the running code first).

Where each fix patches, and why there
    Both must reach modules sharded *before* the fix was applied, and both must keep the release's
    own Dynamo-disable decorator (``disable_if_config_true`` on 2.8-2.11, honouring
    ``torch._dynamo.config.skip_fsdp_hooks``; ``_dynamo_disable`` on 2.12+), which traceable-FSDP2
    and compiled-autograd users depend on. A module's hook is a bound method of the decorator's
    wrapper (the class attribute), so replacing the class attribute would miss modules sharded
    earlier and revert would miss modules sharded while patched. Instead:

    * ``fsdp-recompute-cast`` replaces the function inside the decorator's closure (the cell
      ``func`` of ``FSDPState._pre_forward`` and of ``_post_forward``, and their ``__wrapped__``)
      with a wrapper that calls it and casts when the state was PRE_BACKWARD;
    * ``fsdp-recompute-unshard`` swaps the code of that function (``_pre_forward.__wrapped__.__code__``).

    The decorator objects stay; every bound hook of every module, sharded before or after, sees
    each change at its next call, and sees it go on revert. The two fixes touch different objects
    (a closure cell vs. a code object), so each applies, reverts and is disabled alone
    (``TORCHFIX_DISABLE=fsdp-recompute-cast``), in any order. On 2.8-2.10, where both apply, the
    recompute runs: decorator -> cast wrapper -> ``_pre_forward`` with the unshard lines -> casts,
    i.e. upstream's order (unshard, then cast).

Cost
    Outside recompute, one attribute compare and one extra Python call per hook call
    (fsdp-recompute-cast); fsdp-recompute-unshard adds nothing outside PRE_BACKWARD.

Hazards
    * The cast follows upstream: floating tensors in ``args``/``kwargs`` go to ``param_dtype`` when
      ``cast_forward_inputs`` is set (the default). A module whose recompute inputs already have
      that dtype is unaffected.
    * Grouped ``fully_shard([a, b])`` on torch <= 2.12 runs the group pre-hook for the first module
      only (``_register_group_forward_hooks``); that is unchanged (upstream changed it separately).
    * The unshard fix's code has the pseudo filename ``<torchfix fsdp-recompute-unshard: ...>``
      (registered with ``linecache`` for tracebacks).

Patch points (``torch/distributed/fsdp/_fully_shard/_fsdp_state.py``: ``def`` line, PRE_BACKWARD
branch): ``_pre_forward`` 2.8.0 / 2.9.1 :229 (:234-235), 2.10.0 :234 (:239-240), 2.11.0 :243
(:248-255, upstream's unshard at :252-254), 2.12.0 / 2.12.1 :271 (:276-284); ``_post_forward`` 2.8.0 /
2.9.1 :255 (:258-259), 2.10.0 :260 (:263-264), 2.11.0 :275 (:278-279), 2.12.0 / 2.12.1 :306
(:309-310). Upstream's casts: 2.13.0 :303 and :328 (``return self._cast_forward_inputs(...)`` /
``self._cast_output_dtype(output)``), 2.14.1 :304, 2.15.0 :330.
"""

from __future__ import annotations

import functools
import linecache
import types
from dataclasses import dataclass
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.patching import check_signature
from torchfix_core.sourcepatch import reproduced_source
from torchfix_core.tallies import counts_expression, tally_and_log

from torchfix_fsdp_recompute import probes

CAST_ID = "fsdp-recompute-cast"
UNSHARD_ID = "fsdp-recompute-unshard"

#: What ``torchfix_core.report()`` counts (each in the recompute path only, i.e. in PRE_BACKWARD):
#: ``cast-inputs-in-recompute`` when ``_pre_forward``'s wrapper casts the inputs to ``param_dtype``,
#: ``cast-output-in-recompute`` when ``_post_forward``'s wrapper casts the output to
#: ``output_dtype`` (fsdp-recompute-cast); ``unshard-in-recompute`` when the patched ``_pre_forward``
#: unshards a resharded param group (fsdp-recompute-unshard). Not counted: forwards outside
#: recompute, a policy without those dtypes, a recompute whose params were still unsharded.
CAST_ACTED, cast_log = tally_and_log(CAST_ID, "cast-inputs-in-recompute", "cast-output-in-recompute")
CAST_COUNTS = CAST_ACTED.counts
UNSHARD_ACTED, unshard_log = tally_and_log(UNSHARD_ID, "unshard-in-recompute")
UNSHARD_COUNTS = UNSHARD_ACTED.counts


# -- fsdp-recompute-cast ------------------------------------------------------------------------------


def _cast_parts() -> tuple[Any, Callable[..., Any], Callable[..., Any]]:
    """``(TrainingState.PRE_BACKWARD, _cast_fp_tensor, _apply_to_tensors)`` as ``_fsdp_state`` uses them."""
    module = probes.fsdp_state_module()
    names = ("TrainingState", "_cast_fp_tensor", "_apply_to_tensors")
    missing = [n for n in names if n not in vars(module)]
    if missing:
        raise PatchRefused(f"{probes.MODULE} does not import {missing}: unknown FSDP2 layout")
    pre_backward = getattr(module.TrainingState, "PRE_BACKWARD", None)
    if pre_backward is None:
        raise PatchRefused("TrainingState has no PRE_BACKWARD: unknown FSDP2 layout")
    return pre_backward, module._cast_fp_tensor, module._apply_to_tensors


def _casting_pre_forward(
    inner: Callable[..., Any], pre_backward: Any, cast_fp_tensor: Callable[..., Any], apply: Callable[..., Any]
) -> Callable[..., Any]:
    import torch

    def _pre_forward(self: Any, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._training_state != pre_backward:
            return inner(self, module, args, kwargs)
        args, kwargs = inner(self, module, args, kwargs)
        # upstream's FSDPState._cast_forward_inputs (torch 2.13)
        mp = self._mp_policy
        if not (mp.cast_forward_inputs and mp.param_dtype):
            return args, kwargs
        CAST_COUNTS["cast-inputs-in-recompute"] += 1
        with torch.profiler.record_function("FSDP::cast_forward_inputs"):
            cast_fn = functools.partial(cast_fp_tensor, mp.param_dtype)
            return apply(cast_fn, args), apply(cast_fn, kwargs)

    return _pre_forward


def _casting_post_forward(
    inner: Callable[..., Any], pre_backward: Any, cast_fp_tensor: Callable[..., Any], apply: Callable[..., Any]
) -> Callable[..., Any]:
    import torch

    def _post_forward(self: Any, module: Any, input: Any, output: Any) -> Any:
        if self._training_state != pre_backward:
            return inner(self, module, input, output)
        output = inner(self, module, input, output)
        # upstream's FSDPState._cast_output_dtype (torch 2.13)
        dtype = self._mp_policy.output_dtype
        if dtype is None:
            return output
        CAST_COUNTS["cast-output-in-recompute"] += 1
        with torch.profiler.record_function("FSDP::cast_forward_outputs"):
            return apply(functools.partial(cast_fp_tensor, dtype), output)

    return _post_forward


class RecomputeCastFix(Fix):
    """Apply ``MixedPrecisionPolicy``'s input/output casts in the recompute path (pytorch PR #182580)."""

    def probe(self) -> ProbeResult:
        inputs, outputs = probes.recompute_casts()
        if inputs and outputs:
            return ProbeResult(
                False,
                "FSDPState._pre_forward/_post_forward cast to param_dtype/output_dtype in PRE_BACKWARD "
                "(upstream PR #182580, torch 2.13+)",
            )
        if inputs or outputs:
            raise PatchRefused(
                f"FSDPState casts {'inputs' if inputs else 'outputs'} but not {'outputs' if inputs else 'inputs'} "
                "in PRE_BACKWARD: a partial upstream change this fix does not know"
            )
        _cast_parts()
        return ProbeResult(
            True,
            "FSDPState._pre_forward/_post_forward return unchanged in PRE_BACKWARD: a checkpoint recompute "
            "of an FSDP2 module skips the MixedPrecisionPolicy casts (mat1 and mat2 must have the same dtype)",
        )

    def apply(self) -> None:
        parts = _cast_parts()
        for name, signature, make in (
            ("_pre_forward", probes.PRE_FORWARD_SIGNATURE, _casting_pre_forward),
            ("_post_forward", probes.POST_FORWARD_SIGNATURE, _casting_post_forward),
        ):
            found = probes.hook(name)
            current = found.cell.cell_contents
            where = f"{probes.MODULE}.FSDPState.{name}"
            if current is not found.inner:
                raise PatchRefused(f"{where}: its decorator calls {current!r}, not {name} (patched by someone else)")
            check_signature(found.inner, signature, where)
            wrapper = make(found.inner, *parts)
            functools.update_wrapper(wrapper, found.inner)
            setattr(wrapper, "__torchfix_fix__", self.fix_id)

            def is_inner(raw: Any, inner: Any = found.inner) -> str | None:
                return None if raw is inner else "not the undecorated hook"

            # what the decorator calls (every bound hook, also of modules sharded earlier) ...
            self.patches.replace(found.cell, "cell_contents", wrapper, check=is_inner)
            # ... and what it says it wraps (inspect.unwrap, doctor)
            self.patches.replace(found.decorated, "__wrapped__", wrapper, check=is_inner)
        cast_log.debug("patched %s.FSDPState._pre_forward/_post_forward (cast in PRE_BACKWARD)", probes.MODULE)


# -- fsdp-recompute-unshard ---------------------------------------------------------------------------

#: the early return of torch 2.8.0-2.10.0 ``_pre_forward``, and upstream's lines before it (torch 2.11.0 :249-254)
BRANCH = "if self._training_state == TrainingState.PRE_BACKWARD:"
EARLY_RETURN = "return args, kwargs"
UPSTREAM_LINES = (
    "# With nested FSDP and multiple forward passes before backward,",
    "# the params might have been resharded by a previous post_backward.",
    "# We need to ensure params are unsharded for AC recomputation.",
    "if self._fsdp_param_group and not self._fsdp_param_group.is_unsharded:",
    "    self._fsdp_param_group.unshard()",
    "    self._fsdp_param_group.wait_for_unshard()",
)
#: the count of the unshard, the last line of the new branch (the patched code runs in
#: ``_fsdp_state``'s globals, so it reaches this module by import: a dict lookup, on this rare path only)
COUNT_LINE = f'    {counts_expression(__name__, "UNSHARD_COUNTS")}["unshard-in-recompute"] += 1'
FILENAME_PREFIX = f"<torchfix {UNSHARD_ID}: "


@dataclass(frozen=True)
class Plan:
    """The unshard patch for the running torch: the function, its code now and the new code."""

    func: types.FunctionType
    original: types.CodeType
    code: types.CodeType
    filename: str
    lines: tuple[str, ...]


def unshard_plan() -> Plan:
    """Recompile ``_fsdp_state``'s source with upstream's lines in ``_pre_forward``'s PRE_BACKWARD
    branch; PatchRefused unless the unchanged source reproduces the running code, the branch is
    exactly ``if ...PRE_BACKWARD: return args, kwargs`` once, and the state has one param group."""
    if probes.groups_layout() != "single":
        raise PatchRefused("FSDPState has a list of param groups (torch 2.12+ layout): this backport is for 2.8-2.10")
    func = probes.hook("_pre_forward").inner
    check_signature(func, probes.PRE_FORWARD_SIGNATURE, f"{probes.MODULE}.FSDPState._pre_forward")
    source = reproduced_source(func, what="FSDPState._pre_forward")
    lines = list(source.lines)
    at = [
        i
        for i in range(source.start - 1, source.stop - 2)
        if lines[i].strip() == BRANCH and lines[i + 1].strip() == EARLY_RETURN
    ]
    if len(at) != 1:
        raise PatchRefused(
            f"FSDPState._pre_forward: '{BRANCH} {EARLY_RETURN}' occurs {len(at)} times, expected once (unknown layout)"
        )
    i = at[0] + 1
    pad = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    patched = lines[:i] + [pad + text + "\n" for text in (*UPSTREAM_LINES, COUNT_LINE)] + lines[i:]
    filename = f"{FILENAME_PREFIX}{func.__code__.co_filename}>"
    code = source.recompile(patched, filename, what="FSDPState._pre_forward")
    return Plan(func, func.__code__, code, filename, tuple(patched))


class RecomputeUnshardFix(Fix):
    """Unshard resharded params before a PRE_BACKWARD recompute (pytorch PR #171779)."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self._plan: Plan | None = None  # the probe's, reused by apply() while the code is unchanged

    def probe(self) -> ProbeResult:
        if probes.recompute_unshards():
            return ProbeResult(
                False,
                "FSDPState._pre_forward unshards a resharded param group in PRE_BACKWARD "
                "(upstream PR #171779, torch 2.11+, or this fix applied by another copy)",
            )
        self._plan = unshard_plan()
        return ProbeResult(
            True,
            "FSDPState._pre_forward returns at once in PRE_BACKWARD: a recompute after its params were "
            "resharded runs on DTensor shards (got mixed torch.Tensor and DTensor)",
        )

    def apply(self) -> None:
        found = self._plan
        if found is None or found.func.__code__ is not found.original:
            found = unshard_plan()
        text = "".join(found.lines)
        linecache.cache[found.filename] = (len(text), None, list(found.lines), found.filename)
        self.patches.swap_code(found.func, found.code, signature=probes.PRE_FORWARD_SIGNATURE)
        unshard_log.debug("patched %s.FSDPState._pre_forward (unshard in PRE_BACKWARD)", probes.MODULE)
