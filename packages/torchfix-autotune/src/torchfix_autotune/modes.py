"""Run code with the dispatch modes that declare ``ignore_compile_internals()`` hidden.

Behaviour of :func:`without_compile_internal_modes`:

* Works on the **current thread's** ``__torch_dispatch__`` mode stack (a C++ thread-local), so it
  never affects another thread.
* Hides every *user* mode (one without an infra ``_mode_key``) whose ``ignore_compile_internals()``
  is True: SAC's ``_CachingTorchDispatchMode`` / ``_CachedTorchDispatchMode``, ``DebugMode``, ...
  The other user modes stay, in their original order. Infra modes (``FakeTensorMode``,
  ``ProxyTorchDispatchMode``, ``FunctionalTensorMode``) and the pre-dispatch stack are never
  touched: they always sit below the user modes, and only the part of the stack from the lowest
  hidden mode upwards is popped and re-pushed.
* Restores the exact stack (same objects, same order) when the body returns **and** when it raises.
* Re-entrant: a nested call finds nothing left to hide and runs its body directly; so does any call
  on an empty stack (one C call, no allocation).

Hazards:

* Like torch's own ``_pop_mode_temporarily`` / ``_disable_current_modes``, popping bypasses the
  modes' ``__exit__``: the Python flags ``torch.utils._python_dispatch._is_in_torch_dispatch_mode``
  and ``_is_in_non_infra_torch_dispatch_mode`` may read True inside the body although no user mode
  is left. ``_is_in_any_mode_without_ignore_compile_internals`` stays exact (only modes that ignore
  compile internals are hidden, and they never set it).
* Everything the body dispatches is invisible to the hidden modes: SAC neither records nor replays
  it (the point of the fix), and ``DebugMode`` does not log it (it already skips Inductor
  benchmarking through ``DebugMode._benchmarking_inductor``).

Upstream: no fix in torch <= 2.15.0; the strict replay that turns the extra ops into an error came
with https://github.com/pytorch/pytorch/pull/176455 (torch 2.13). Same idea for a different
autotuner: https://github.com/Dao-AILab/quack/pull/204.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode, _push_mode

log = logging.getLogger("torchfix.autotune")

_len_stack = torch._C._len_torch_dispatch_stack
_stack_at = torch._C._get_dispatch_stack_at

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def is_infra_mode(mode: Any) -> bool:
    """True for the modes torch keeps in its fixed infra slots (Fake, Proxy, Functional).

    The C++ stack places a mode in an infra slot when it has a ``_mode_key``; those slots always
    sit below every user mode.
    """
    return getattr(mode, "_mode_key", None) is not None


def is_hidden(mode: Any) -> bool:
    """True when :func:`without_compile_internal_modes` hides ``mode``: a user (non-infra) mode
    whose ``ignore_compile_internals()`` is True. A mode whose answer cannot be read is kept."""
    if is_infra_mode(mode):
        return False
    try:
        return bool(mode.ignore_compile_internals())
    except Exception:  # noqa: BLE001 - a broken user mode is kept, never hidden
        return False


def current_stack() -> list[TorchDispatchMode]:
    """The current thread's dispatch mode stack, bottom first (infra modes, then user modes)."""
    return [_stack_at(i) for i in range(_len_stack())]


@contextlib.contextmanager
def without_compile_internal_modes() -> Iterator[list[TorchDispatchMode]]:
    """Context manager: run the body with the ``ignore_compile_internals()`` user modes hidden.

    Yields the list of hidden modes (bottom first; empty when nothing was hidden). See the module
    docstring for the exact semantics and hazards.
    """
    depth = _len_stack()
    if depth == 0:
        yield []
        return
    stack = [_stack_at(i) for i in range(depth)]
    flags = [is_hidden(mode) for mode in stack]
    first = next((i for i, flag in enumerate(flags) if flag), None)
    if first is None:
        yield []
        return
    above = stack[first:]
    if any(is_infra_mode(mode) for mode in above):
        # Never seen: infra slots sit below user modes. Do not guess; run unfiltered.
        _warn_once(
            "torchfix autotune: an infra dispatch mode sits above a user mode; "
            "running the autotuner without filtering the mode stack"
        )
        yield []
        return
    popped = [_pop_mode() for _ in above]  # top first
    if [id(m) for m in reversed(popped)] != [id(m) for m in above]:
        for mode in reversed(popped):
            _push_mode(mode)
        _warn_once("torchfix autotune: the dispatch mode stack changed while it was read; running unfiltered")
        yield []
        return
    hidden = [mode for mode, flag in zip(above, flags[first:]) if flag]
    kept = [mode for mode, flag in zip(above, flags[first:]) if not flag]
    try:
        for mode in kept:
            _push_mode(mode)
        yield hidden
    finally:
        # Whatever the body left above the untouched part goes; then the original order comes back.
        while _len_stack() > first:
            _pop_mode()
        for mode in above:
            _push_mode(mode)
