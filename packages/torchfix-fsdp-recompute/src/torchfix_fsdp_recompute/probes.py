"""Probes on the live FSDP2 objects (no version strings, no process group, no ``torch._dynamo``).

Each probe builds a real ``FSDPState()`` (its ``__init__`` needs no process group or device), puts
it in ``TrainingState.PRE_BACKWARD`` (the state of a module whose forward runs again inside
backward: an activation checkpoint recompute) and calls the function ``FSDPState._pre_forward`` /
``_post_forward`` run, *below* their Dynamo-disable decorator (so Dynamo is not imported), on a
small CPU tensor. What comes back says whether this torch casts / unshards there.

Layout facts the probes and patches rely on (``torch/distributed/fsdp/_fully_shard/_fsdp_state.py``):

* 2.8.0-2.11.0: ``_pre_forward`` / ``_post_forward`` are decorated with
  ``disable_if_config_true`` (a closure over ``func``); one ``_fsdp_param_group`` per state (an
  instance attribute, ``None`` without parameters).
* 2.12.0-2.15.0: the decorator is ``_fsdp_common._dynamo_disable`` (a closure over ``func``);
  ``_fsdp_param_groups`` is a list and ``_fsdp_param_group`` a read-only property over it.
* 2.15.0 ``_pre_forward`` first reads ``_state_ctx.gradient_reduction_pending`` and
  ``_comm_ctx.active_gradient_reduction``: a real ``FSDPState()`` has both.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from torchfix_core import PatchRefused
from torchfix_core.patching import is_torchfix_wrapper

MODULE = "torch.distributed.fsdp._fully_shard._fsdp_state"
#: parameters of the two hooks, identical in torch 2.8.0-2.15.0
PRE_FORWARD_SIGNATURE = ("self", "module", "args", "kwargs")
POST_FORWARD_SIGNATURE = ("self", "module", "input", "output")


@dataclass(frozen=True)
class Hook:
    """One FSDP forward hook as this torch defines it: the class attribute (the decorator's
    wrapper, which ``fully_shard`` binds into every module's hook), the cell of that wrapper's
    closure holding the function it calls, and the undecorated function itself."""

    name: str
    decorated: types.FunctionType
    cell: Any  # types.CellType (3.8+)
    inner: types.FunctionType


def fsdp_state_module() -> types.ModuleType:
    """``torch.distributed.fsdp._fully_shard._fsdp_state`` (imported: it is the trigger)."""
    import importlib

    return importlib.import_module(MODULE)


def innermost(func: Any) -> Any:
    """``func`` with every torchfix wrapper (``__torchfix_fix__``, ``__wrapped__``) peeled off."""
    while is_torchfix_wrapper(func):
        func = func.__wrapped__
    return func


def hook(name: str) -> Hook:
    """The decorated ``FSDPState.<name>``, the closure cell its decorator reads the function from,
    and the undecorated function (under any torchfix wrapper in that cell). Refuses any other
    shape: a decorator that is not a closure over exactly one function (``func``), or a function
    that is not this hook."""
    cls = getattr(fsdp_state_module(), "FSDPState", None)
    where = f"{MODULE}.FSDPState.{name}"
    decorated = None if cls is None else cls.__dict__.get(name)
    if not isinstance(decorated, types.FunctionType):
        raise PatchRefused(f"{where} is not a plain function on the class (unknown FSDP2 layout)")
    closure = decorated.__closure__ or ()
    freevars = decorated.__code__.co_freevars
    if freevars != ("func",) or len(closure) != 1:
        raise PatchRefused(
            f"{where}: its decorator is not a closure over one function 'func' (free variables {freevars}); "
            "unknown Dynamo-disable decorator"
        )
    cell = closure[0]
    inner = innermost(cell.cell_contents)
    if not isinstance(inner, types.FunctionType) or inner.__code__.co_name != name:
        raise PatchRefused(f"{where}: its decorator does not call the function {name} (found {inner!r})")
    if innermost(getattr(decorated, "__wrapped__", None)) is not inner:
        raise PatchRefused(f"{where}.__wrapped__ is not the function its decorator calls")
    return Hook(name, decorated, cell, inner)


def groups_layout() -> str:
    """``"single"`` (``_fsdp_param_group``, torch 2.8-2.11) or ``"list"`` (``_fsdp_param_groups``,
    2.12+), read from a fresh ``FSDPState()``; PatchRefused for anything else."""
    import inspect

    module = fsdp_state_module()
    state = module.FSDPState()
    if isinstance(inspect.getattr_static(module.FSDPState, "_fsdp_param_group", None), property):
        if isinstance(getattr(state, "_fsdp_param_groups", None), list):
            return "list"
    elif "_fsdp_param_group" in vars(state) and state._fsdp_param_group is None:
        if not hasattr(state, "_fsdp_param_groups"):
            return "single"
    raise PatchRefused("FSDPState has neither the 2.8-2.11 _fsdp_param_group nor the 2.12+ _fsdp_param_groups layout")


def _recompute_state(**mp: Any) -> Any:
    """A fresh ``FSDPState()`` in PRE_BACKWARD with ``MixedPrecisionPolicy(**mp)`` and no params."""
    module = fsdp_state_module()
    from torch.distributed.fsdp._fully_shard._fsdp_api import MixedPrecisionPolicy
    from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState

    state = module.FSDPState()
    state._training_state = TrainingState.PRE_BACKWARD
    state._mp_policy = MixedPrecisionPolicy(**mp)
    return state


def _called(name: str, wrappers: bool) -> types.FunctionType:
    found = hook(name)
    return found.cell.cell_contents if wrappers else found.inner  # type: ignore[no-any-return]


def recompute_casts(*, wrappers: bool = False) -> tuple[bool, bool]:
    """Whether this torch's recompute path casts: ``(inputs to param_dtype, outputs to output_dtype)``.

    Calls the undecorated ``_pre_forward`` with ``(fp32 tensor,)`` under ``param_dtype=bfloat16`` and
    ``_post_forward`` with an fp32 output under ``output_dtype=float16``, both in PRE_BACKWARD.
    ``wrappers``: call what the decorator calls (torchfix's wrappers included), not torch's own function.
    """
    import torch
    from torchfix_core.probes import isolated

    pre, post = _called("_pre_forward", wrappers), _called("_post_forward", wrappers)

    def body() -> tuple[bool, bool]:
        state = _recompute_state(param_dtype=torch.bfloat16, output_dtype=torch.float16)
        try:
            args, _ = pre(state, None, (torch.zeros(2),), {})
            out = post(state, None, (), torch.zeros(2))
        except Exception as exc:  # noqa: BLE001 - any failure means a layout this probe does not know
            raise PatchRefused(
                f"FSDPState recompute hooks fail on a fresh state ({type(exc).__name__}: {exc})"
            ) from None
        if not (isinstance(args, tuple) and len(args) == 1 and isinstance(args[0], torch.Tensor)):
            raise PatchRefused(f"FSDPState._pre_forward returned {type(args).__name__}, expected the args tuple")
        if not isinstance(out, torch.Tensor):
            raise PatchRefused(f"FSDPState._post_forward returned {type(out).__name__}, expected the output")
        return args[0].dtype == torch.bfloat16, out.dtype == torch.float16

    return isolated(body)  # type: ignore[no-any-return]


class _GroupRecorder:
    """Stands in for an FSDPParamGroup whose parameters are sharded; records what is called."""

    def __init__(self) -> None:
        self.is_unsharded = False
        self.calls: list[str] = []

    def unshard(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("unshard")
        self.is_unsharded = True

    def wait_for_unshard(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("wait_for_unshard")


def recompute_unshards(*, wrappers: bool = False) -> bool:
    """Whether this torch's ``_pre_forward`` unshards a sharded param group in PRE_BACKWARD: the
    undecorated function runs on a fresh state whose one group is a recorder with
    ``is_unsharded=False``; True when it called ``unshard()`` and ``wait_for_unshard()``.
    ``wrappers`` as for :func:`recompute_casts`."""
    import torch
    from torchfix_core.probes import isolated

    pre = _called("_pre_forward", wrappers)
    layout = groups_layout()

    def body() -> bool:
        state = _recompute_state()
        group = _GroupRecorder()
        if layout == "list":
            state._fsdp_param_groups = [group]
        else:
            state._fsdp_param_group = group
        try:
            pre(state, None, (torch.zeros(2),), {})
        except Exception as exc:  # noqa: BLE001 - any failure means a layout this probe does not know
            raise PatchRefused(f"FSDPState._pre_forward fails on a fresh state ({type(exc).__name__}: {exc})") from None
        if group.calls not in ([], ["unshard", "wait_for_unshard"]):
            raise PatchRefused(f"FSDPState._pre_forward called {group.calls} on a sharded group: unknown layout")
        return bool(group.calls)

    return isolated(body)  # type: ignore[no-any-return]
