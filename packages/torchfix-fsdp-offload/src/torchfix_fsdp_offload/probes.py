"""Probes on the live FSDP2 objects (code objects only: no version string, no process group, no CUDA).

The bug needs CUDA streams and pinned memory, so it cannot be shown on a CPU: the probe reads the
running functions instead. Layout facts it relies on (``torch/distributed/fsdp/_fully_shard/``):

* ``_fsdp_param_group.py`` imports ``foreach_reduce`` (decorated with ``@torch.no_grad()``: the
  module global is the decorator's closure, its ``__wrapped__`` the function) by name, and
  ``FSDPParamGroup.post_backward`` (under ``@_dynamo_disable`` from 2.12.0) calls it through that
  module global (``LOAD_GLOBAL``), the only caller in torch 2.8.0-2.15.0.
* ``foreach_reduce``'s first parameter is ``fsdp_params`` (a list of ``FSDPParam``), and its body
  reads ``fsdp_param.pin_memory`` exactly once, in ``non_blocking = fsdp_param.pin_memory and not
  to_accumulate_grad`` of the CPU-offload branch (2.8.0-2.12.1); 2.13.0+ computes
  ``has_post_acc_grad_hook`` there and adds ``and not has_post_acc_grad_hook`` (upstream PR #180666).
* ``FSDPParam.pin_memory`` is a plain instance attribute set in ``FSDPParam.__init__`` (also read
  in ``_init_sharded_param`` and ``reset_sharded_param``, at sharding / lazy-init time).
"""

from __future__ import annotations

import dis
import importlib
import inspect
import types
from dataclasses import dataclass

from torchfix_core import PatchRefused
from torchfix_core.patching import is_torchfix_wrapper

MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param_group"
NAME = "foreach_reduce"
#: the local variable of upstream's guard (torch 2.13.0 ``_fsdp_collectives.py`` :722)
UPSTREAM_GUARD = "has_post_acc_grad_hook"


@dataclass(frozen=True)
class Layout:
    """What the probe found: the module whose global is patched, torch's undecorated
    ``foreach_reduce`` (under any torchfix wrapper and the no_grad decorator) and whether it
    carries upstream's guard."""

    module: types.ModuleType
    func: types.FunctionType
    upstream_guard: bool


def innermost(func: object) -> object:
    """``func`` with every torchfix wrapper (``__torchfix_fix__``, ``__wrapped__``) peeled off."""
    while is_torchfix_wrapper(func):
        func = func.__wrapped__  # type: ignore[attr-defined]
    return func


def _attr_reads(code: types.CodeType, name: str) -> int:
    """How many times ``code`` (not its nested functions) reads the attribute ``name``."""
    return sum(1 for i in dis.get_instructions(code) if i.opname in ("LOAD_ATTR", "LOAD_METHOD") and i.argval == name)


def _reads_global(code: types.CodeType, name: str) -> bool:
    return any(i.opname == "LOAD_GLOBAL" and i.argval == name for i in dis.get_instructions(code))


def _undecorated(decorated: object) -> types.FunctionType | None:
    """torch's ``foreach_reduce`` function: ``decorated`` itself, or the function that its
    decorator (``@torch.no_grad()``, a closure with ``__wrapped__``, torch 2.8.0-2.15.0) calls."""
    if not isinstance(decorated, types.FunctionType):
        return None
    if decorated.__code__.co_name == NAME:
        return decorated
    inner = getattr(decorated, "__wrapped__", None)
    cells = [c.cell_contents for c in decorated.__closure__ or ()]
    if isinstance(inner, types.FunctionType) and inner.__code__.co_name == NAME and any(c is inner for c in cells):
        return inner
    return None


def layout() -> Layout:
    """Read the live layout; :class:`PatchRefused` for any shape other than the two known ones."""
    module = importlib.import_module(MODULE)
    where = f"{MODULE}.{NAME}"
    decorated = innermost(vars(module).get(NAME))
    func = _undecorated(decorated)
    if func is None:
        raise PatchRefused(f"{where} is {decorated!r}, expected torch's foreach_reduce (unknown FSDP2 layout)")
    params = tuple(inspect.signature(func).parameters)
    if not params or params[0] != "fsdp_params":
        raise PatchRefused(f"{where} has parameters {params}, expected 'fsdp_params' first")
    code = func.__code__
    if UPSTREAM_GUARD in code.co_varnames:
        return Layout(module, func, True)
    missing = [n for n in ("offload_to_cpu", "grad_offload_event", "sharded_param") if n not in code.co_names]
    if missing or "_post_accumulate_grad_hooks" not in code.co_consts:
        raise PatchRefused(f"{where} lacks {missing or ['_post_accumulate_grad_hooks']}: unknown offload/hook layout")
    reads = _attr_reads(code, "pin_memory")
    if reads != 1:
        raise PatchRefused(f"{where} reads .pin_memory {reads} times, expected once (the non_blocking line)")
    group = vars(module).get("FSDPParamGroup")
    post_backward = None if group is None else vars(group).get("post_backward")
    if isinstance(post_backward, types.FunctionType):  # under 2.12+'s @_dynamo_disable (``__wrapped__``)
        post_backward = inspect.unwrap(post_backward)
    if not isinstance(post_backward, types.FunctionType) or not _reads_global(post_backward.__code__, NAME):
        raise PatchRefused(f"{MODULE}.FSDPParamGroup.post_backward does not call the module global {NAME}")
    param_cls = vars(module).get("FSDPParam")
    init = None if param_cls is None else vars(param_cls).get("__init__")
    if (
        not isinstance(init, types.FunctionType)
        or "pin_memory" not in init.__code__.co_names
        or inspect.getattr_static(param_cls, "pin_memory", None) is not None
    ):
        raise PatchRefused("FSDPParam.pin_memory is not a plain instance attribute set in __init__")
    return Layout(module, func, False)
