"""Generic building blocks for probes on live torch objects (never the version string).

* :func:`isolated` runs a probe body with the calling thread's dispatch and torch-function modes
  out of the way, so an outer mode (a user's SAC forward, FakeTensorMode during the compile that
  imported a fix's trigger, a logging TorchFunctionMode) never sees, records or stores the probe's
  ops. Only the calling thread's (thread-local) mode stacks are touched.
* :func:`counting_mode` is a plain dispatch mode recording every op it sees (:func:`counting_mode_class`
  its class).

What a probe checks belongs to the fix that needs it; nothing here knows a fix. Imported only by
fix implementations when they are probed, never at activation: every function imports torch inside.
"""

from __future__ import annotations

from typing import Any, Callable

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
