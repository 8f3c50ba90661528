"""Generic building blocks for probes on live torch objects (never the version string).

* :func:`isolated` runs a probe body with the calling thread's dispatch and torch-function modes
  out of the way, so an outer mode (a user's SAC forward, FakeTensorMode during the compile that
  imported a fix's trigger, a logging TorchFunctionMode) never sees, records or stores the probe's
  ops. Only the calling thread's (thread-local) mode stacks are touched.
* :func:`counting_mode` is a plain dispatch mode recording every op it sees (:func:`counting_mode_class`
  its class).
* :func:`method_parameters` - the parameter names of a method defined on a class itself (the
  layout check before wrapping it); :func:`require_parameters` refuses the patch unless they are
  the ones a wrapper was written for.
* :func:`same_code` - whether two code objects are the same program (a fix that recompiles a
  library's source checks that the unchanged source reproduces the live code first).
* :func:`imported_module` - a fix's trigger module as the registry imported it, or
  :class:`PatchRefused` when it is not imported (a probe or apply called out of order).
* :func:`nested_code` - a code object and every code object nested in its constants (functions,
  classes, lambdas and comprehensions defined inside it): what a layout check reads when it asks
  which names a function loads or which inner function it defines.

What a probe checks belongs to the fix that needs it; nothing here knows a fix. Imported only by
fix implementations when they are probed, never at activation: every function imports torch inside.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Callable, Iterator

from torchfix_core.patching import PatchRefused


def isolated(body: Callable[[], Any]) -> Any:
    """Run ``body`` with this thread's dispatch and torch-function modes out of the way."""
    import torch

    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:
        raise PatchRefused("torch.utils._python_dispatch._disable_current_modes does not exist") from None
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        return body()


def counting_mode_class() -> type:
    """A plain TorchDispatchMode class (``ignore_compile_internals()`` False) whose instances record
    every op they see in ``.seen`` (subclass it for a mode that declares more)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class SeenOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    return SeenOps


def counting_mode() -> Any:
    """An instance of :func:`counting_mode_class`: a plain mode recording every op in ``.seen``."""
    return counting_mode_class()()


def method_parameters(owner: object, method: str) -> tuple[str, ...] | None:
    """Parameter names of ``method`` as defined in ``owner.__dict__`` (a class's own method, not an
    inherited one), or None when ``owner`` is not a class, does not define it, or has no signature."""
    if not isinstance(owner, type):
        return None
    func = owner.__dict__.get(method)
    if func is None:
        return None
    try:
        return tuple(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def require_parameters(owner: object, method: str, expected: tuple[str, ...], *, where: str) -> None:
    """Raise :class:`PatchRefused` unless ``owner`` defines ``method`` with exactly the parameter
    names ``expected`` (see :func:`method_parameters`); ``where`` names it in the reason
    (``"torch.utils.checkpoint._CheckpointFrame.__init__"``)."""
    params = method_parameters(owner, method)
    if params is None:
        raise PatchRefused(f"{where} not found")
    if params != expected:
        raise PatchRefused(f"{where} has parameters {params}, expected {expected}")


def same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """Same bytecode, names, constants (nested code objects compared the same way) and flags: the
    test that source compiled here is the program the interpreter runs (line numbers may differ)."""
    fields: tuple[str, ...] = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_argcount")
    fields += ("co_kwonlyargcount", "co_posonlyargcount", "co_flags", "co_name")
    if any(getattr(a, f) != getattr(b, f) for f in fields) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) or isinstance(y, types.CodeType):
            if not (isinstance(x, types.CodeType) and isinstance(y, types.CodeType) and same_code(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def nested_code(code: types.CodeType, *, include_self: bool = True) -> Iterator[types.CodeType]:
    """``code`` (unless ``include_self`` is false) and, depth first in constant order, every code
    object nested in its constants, at any depth."""
    if include_self:
        yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from nested_code(const)


def imported_module(name: str) -> types.ModuleType:
    """The module ``name`` from ``sys.modules``; :class:`PatchRefused` when it is not imported. The
    registry applies a fix only once its triggers are imported, so a fix looks its patched module up
    here instead of importing it (which would import it too early, or at all)."""
    module = sys.modules.get(name)
    if module is None:
        raise PatchRefused(f"{name} is not imported")
    return module
