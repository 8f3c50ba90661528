"""fsdp-offload-hook: a blocking gradient copy for FSDP2 parameters with post-accumulate-grad hooks.

Background (upstream PR pytorch/pytorch#180666, in torch 2.13.0)
    With ``fully_shard(..., offload_policy=CPUOffloadPolicy(pin_memory=True))`` (``pin_memory`` is
    the policy's default), ``foreach_reduce`` (``torch/distributed/fsdp/_fully_shard/
    _fsdp_collectives.py``) copies each reduce-scattered gradient shard to pinned CPU memory with
    ``non_blocking = fsdp_param.pin_memory and not to_accumulate_grad``, records an event for it,
    sets ``sharded_param.grad`` to the CPU tensor and then, on the same CPU thread, runs the sharded
    parameter's ``_post_accumulate_grad_hooks``. The event is waited for only in
    ``FSDPParamGroup.finalize_backward``, at the end of backward. A hook that reads ``param.grad``
    (optimizer in backward, gradient clipping or logging in a hook) reads a pinned buffer the copy
    may not have filled yet: stale or partial gradients and wrong updates, with no error. Torch
    2.8.0-2.12.1. Upstream adds ``and not has_post_acc_grad_hook`` to that condition (the copy is
    blocking for a parameter with hooks); accumulation (``grad`` already set) was always blocking.

The fix
    It wraps ``foreach_reduce`` where ``_fsdp_param_group`` looks it up (the module global that
    ``FSDPParamGroup.post_backward`` calls; torch imports it there by name, and that is the only
    caller). For the duration of the call the wrapper sets ``FSDPParam.pin_memory = False`` on the
    parameters whose sharded parameter has post-accumulate-grad hooks, and restores ``True``
    afterwards (also when the call raises). ``pin_memory`` is read exactly once inside
    ``foreach_reduce``, in that condition (the probe checks it), so the effect is exactly
    upstream's condition: blocking copies for hooked parameters, non-blocking for all others.
    Because the patched name is looked up at each call, parameter groups created before the fix
    was applied are covered, and a revert reaches them too.

    Not changed: ``FSDPParam.pin_memory`` outside the call (a property saying False whenever hooks
    exist would also stop ``reset_sharded_param`` from re-pinning the sharded parameter after
    ``load_state_dict`` / ``to_empty``), parameters without hooks, the unpinned policy.

Cost
    One pass over the group's parameters per ``foreach_reduce`` call (once per parameter group per
    backward); for hooked parameters the device-to-host copy is synchronous, as in torch 2.13.

Hazards
    * A hook that itself calls ``reset_sharded_param`` (e.g. loads a state dict from inside
      backward) sees ``pin_memory`` False during the call and does not re-pin; nothing in torch
      does that.
    * Under compiled autograd torch 2.8-2.11 skip the hooks inside ``foreach_reduce``; the wrapper
      still makes the hooked parameters' copies blocking there (harmless, slightly slower).
    * Something else that replaced ``_fsdp_param_group.foreach_reduce`` first (a function whose
      code is not torch's ``foreach_reduce``, or a torchfix wrapper) makes the fix refuse rather
      than stack on it.

Patch points (``def foreach_reduce`` / the ``non_blocking`` line in ``_fsdp_collectives.py``; the
call in ``_fsdp_param_group.py``): 2.8.0 :376 / :529, call :457; 2.9.1 :447 / :596, :544; 2.10.0 :447
/ :621, :566; 2.11.0 :448 / :622, :567; 2.12.0 and 2.12.1 :524 / :706, :590. Upstream's guard: 2.13.0
and 2.14.1 :722-733, 2.15.0 :790-801.
"""

from __future__ import annotations

from typing import Any, Callable

from torchfix_core import Fix, ProbeResult
from torchfix_core.tallies import tally_and_log

from torchfix_fsdp_offload import probes

FIX_ID = "fsdp-offload-hook"
#: What ``torchfix_core.report()`` counts: ``blocking-copy-for-hooks``, once per ``foreach_reduce``
#: call (one per FSDP parameter group per backward) in which the wrapper made at least one copy
#: blocking that torch would have made non-blocking (a pinned, hooked parameter whose gradient is
#: not accumulated into an existing one). Not counted: groups without hooked pinned parameters,
#: and gradient accumulation (blocking in torch already).
ACTED, log = tally_and_log(FIX_ID, "blocking-copy-for-hooks")
COUNTS = ACTED.counts


def _hooked_pinned(fsdp_params: list[Any]) -> list[Any]:
    """The ``FSDPParam``s whose copy torch would pin and overlap although hooks read the gradient."""
    return [p for p in fsdp_params if p.pin_memory and getattr(p.sharded_param, "_post_accumulate_grad_hooks", None)]


def _blocking_for_hooks(original: Callable[..., Any]) -> Callable[..., Any]:
    def foreach_reduce(fsdp_params: list[Any], *args: Any, **kwargs: Any) -> Any:
        changed = _hooked_pinned(fsdp_params) if isinstance(fsdp_params, list) else []
        if not changed:
            return original(fsdp_params, *args, **kwargs)
        if any(p.sharded_param.grad is None for p in changed):
            COUNTS["blocking-copy-for-hooks"] += 1
        for p in changed:
            p.pin_memory = False  # the one read in foreach_reduce: non_blocking becomes False
        try:
            return original(fsdp_params, *args, **kwargs)
        finally:
            for p in changed:
                p.pin_memory = True

    return foreach_reduce


class OffloadHookFix(Fix):
    """Blocking pinned-memory gradient copies for parameters with post-accumulate-grad hooks
    (upstream PR #180666)."""

    def probe(self) -> ProbeResult:
        found = probes.layout()
        if found.upstream_guard:
            return ProbeResult(
                False,
                "foreach_reduce makes the CPU-offload copy blocking for parameters with post-accumulate-grad "
                f"hooks ({probes.UPSTREAM_GUARD}; upstream PR #180666, torch 2.13+)",
            )
        return ProbeResult(
            True,
            "foreach_reduce copies gradients to pinned CPU memory non-blocking and then runs the parameters' "
            "post-accumulate-grad hooks without waiting: a hook reading param.grad can read an unfinished copy",
        )

    def apply(self) -> None:
        found = probes.layout()
        self.patches.wrap(found.module, probes.NAME, _blocking_for_hooks)
        log.debug("patched %s.%s (blocking copies for hooked parameters)", probes.MODULE, probes.NAME)
