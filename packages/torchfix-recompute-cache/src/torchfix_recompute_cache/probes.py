"""Probes on the live torch objects (no version strings); none of them imports ``torch._dynamo``.

All are side-effect free: :func:`reported_lru_state` reads the switch by setting it and putting the
value it reported back, and only where the switch reports its previous value.
"""

from __future__ import annotations

from typing import Any, Callable

#: Parameters of ``torch.utils.checkpoint._checkpoint_hook.__init__`` the fix was written for
#: (identical in torch 2.10.0, 2.11.0, 2.12.0, 2.13.0, 2.14.1 and 2.15.0).
HOOK_INIT_SIGNATURE = ("self", "frame")

#: ``__qualname__`` prefix of the pack hook that ``_checkpoint_hook`` installs for the forward of every
#: non-reentrant checkpoint (``_checkpoint_hook.__init__.<locals>.pack_hook`` on 2.10-2.15).
PACK_HOOK_QUALNAME = "_checkpoint_hook.__init__."


def eval_frame_module() -> Any:
    """``torch._C._dynamo.eval_frame`` (a C module, loaded by ``import torch``), or None."""
    import torch

    dynamo_c = getattr(torch._C, "_dynamo", None)
    return getattr(dynamo_c, "eval_frame", None)


def lru_switch() -> Callable[[bool], Any] | None:
    """torch's own ``torch._C._dynamo.eval_frame._set_lru_cache`` (pytorch PR #167038, torch 2.10), or
    None. Where this fix's recorder is installed, the builtin behind it (``__wrapped__``), so that a
    probe's read is not recorded as the program's choice."""
    module = eval_frame_module()
    fn = getattr(module, "_set_lru_cache", None)
    fn = getattr(fn, "__wrapped__", fn)
    return fn if callable(fn) else None


def switch_reports_state(fn: Callable[[bool], Any]) -> bool:
    """True when ``_set_lru_cache`` returns the previous setting (its pybind signature says
    ``-> bool``: torch 2.15); it returns None on 2.10-2.14 and the setting cannot be read there."""
    doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
    return bool(doc) and doc[0].replace(" ", "").endswith("->bool")


def reported_lru_state(fn: Callable[[bool], Any]) -> bool | None:
    """Whether Dynamo's LRU reordering is on now, where the switch can say (else None).

    Sets the switch to True, reads the previous value it returns, and sets that value back (a
    read-and-restore: no net change). Never called where the switch does not report, because there
    the first call would overwrite a setting nobody could restore."""
    if not switch_reports_state(fn):
        return None
    previous = fn(True)
    fn(bool(previous))
    return bool(previous)


def checkpoint_forward_in_flight() -> bool:
    """True when this thread is inside the forward of a non-reentrant checkpoint right now: the
    innermost saved-tensor hooks are the pack hook of ``_checkpoint_hook``. False when it cannot
    tell (no such torch API)."""
    import torch

    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    if top is None:
        return False
    try:
        hooks = top(False)
    except (TypeError, RuntimeError):
        return False
    if not hooks:
        return False
    return str(getattr(hooks[0], "__qualname__", "")).startswith(PACK_HOOK_QUALNAME)
