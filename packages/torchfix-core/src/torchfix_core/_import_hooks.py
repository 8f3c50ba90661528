"""Post-import hooks: run a callback right after a module finishes importing.

:func:`when_imported` fires at once if the module is already in ``sys.modules``; otherwise a
``sys.meta_path`` finder wraps the module's loader so that the callback runs right after
``exec_module`` returns. The loader is restored on the module afterwards, so ``module.__loader__``
and ``__spec__.loader`` are the original ones. Nothing here imports the watched module.

**Settled imports.** A trigger module is often imported *while another import is still running*
(``torch.distributed.tensor`` is imported half-way through ``import torch._dynamo``; everything is
imported half-way through ``import torch``). A fix probing at that moment would see partially
initialized modules (``partially initialized module 'torch._dynamo' has no attribute ...``). So
callbacks are deferred until no other module is initializing: the specs of the modules still
initializing are watched, and the callbacks fire the moment the last of them is marked done by the
import system (``spec._initializing = False``, set in ``importlib._bootstrap._load_unlocked``).

Callbacks must not raise; if one does, the exception is passed to the ``on_error`` callback given
at registration (the registry records it as a failed fix) and the import still succeeds.

**The patch lock.** :data:`PATCH_LOCK`, held while any torchfix patch or revert runs and around the
registry's state changes, is defined here: this module is a leaf that ``import torch`` loads anyway
(activation arms its deferred callbacks through it), so the lock costs no module of its own there,
and every layer (patching, spec, the registry, activation) imports it from here without importing
the others. It is a lock of its own, distinct from the hooks' internal ``_lock``. Public as
:data:`torchfix_core.patching.PATCH_LOCK` (and :data:`torchfix_core.spec.PATCH_LOCK`).
"""

from __future__ import annotations

import sys
import threading
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, Callable, Sequence

Callback = Callable[[ModuleType], None]
ErrorCallback = Callable[[BaseException], None]

#: Held while any torchfix patch or revert runs, and by the registry and activation around state
#: changes (re-entrant). See the module docstring for why it is defined here.
PATCH_LOCK = threading.RLock()
_lock = threading.RLock()
_hooks: dict[str, list[tuple[Callback, ErrorCallback | None]]] = {}
_resolving = threading.local()
_deferred: list[tuple[ModuleType, list[tuple[Callback, ErrorCallback | None]]]] = []
_WATCH = "_torchfix_watch"


def _busy(exclude: ModuleType | None) -> list[Any]:
    """Specs of the modules (other than ``exclude``) that are still being initialized."""
    specs = []
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        if module is not exclude and spec is not None and getattr(spec, "_initializing", False):
            specs.append(spec)
    return specs


def _watch(spec: Any) -> None:
    """Call :func:`_settle` when the import system marks ``spec`` initialized.

    The spec's class is swapped for a subclass whose ``__setattr__`` notices
    ``_initializing = False``; the original class is put back at that moment.
    """
    cls = type(spec)
    if getattr(cls, _WATCH, False):
        return
    original = cls

    def __setattr__(self: Any, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "_initializing" and not value:
            object.__setattr__(self, "__class__", original)
            _settle()

    watcher = type(f"{cls.__name__}", (cls,), {"__setattr__": __setattr__, _WATCH: True, "__module__": cls.__module__})
    try:
        object.__setattr__(spec, "__class__", watcher)
    except TypeError:  # an exotic spec type: fall back to firing at the next settle or now
        pass


def _settle() -> None:
    """Fire every deferred callback whose module no longer waits for another import."""
    with _lock:
        ready = []
        for item in list(_deferred):
            busy = _busy(None)
            if busy:
                for spec in busy:
                    _watch(spec)
            else:
                _deferred.remove(item)
                ready.append(item)
    for module, callbacks in ready:
        _fire(module, callbacks)


def _fire_when_settled(
    module: ModuleType, callbacks: list[tuple[Callback, ErrorCallback | None]], executed: bool = False
) -> None:
    """Fire now if no import is in progress, else defer. ``executed``: the module's own body has
    run (called from its loader, before the import system marks it initialized)."""
    if not callbacks:
        return
    busy = _busy(module if executed else None)
    if not busy:
        _fire(module, callbacks)
        return
    with _lock:
        _deferred.append((module, callbacks))
        for spec in busy:
            _watch(spec)


def _fire(module: ModuleType, callbacks: Sequence[tuple[Callback, ErrorCallback | None]]) -> None:
    for callback, on_error in callbacks:
        try:
            callback(module)
        except BaseException as exc:  # noqa: BLE001 - a hook must never break the import
            if on_error is None or isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            on_error(exc)


class _HookLoader(Loader):
    """Delegates to the real loader, then fires the hooks and puts the real loader back."""

    def __init__(self, loader: Loader, name: str) -> None:
        self._loader = loader
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._loader.exec_module(module)
        finally:
            module.__loader__ = self._loader
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._loader
        with _lock:
            callbacks = _hooks.pop(self._name, [])
        _fire_when_settled(module, callbacks, executed=True)


class _HookFinder(MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in _hooks or getattr(_resolving, "active", False):
            return None
        _resolving.active = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            _resolving.active = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookLoader(spec.loader, fullname)
        return spec


_finder = _HookFinder()


def when_imported(name: str, callback: Callback, on_error: ErrorCallback | None = None) -> None:
    """Call ``callback(module)`` once ``name`` is imported and no other import is in progress: now if
    that is already so, else as soon as it is. Each registration fires at most once."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append((callback, on_error))
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    _fire_when_settled(module, [(callback, on_error)])


def cancel(callback: Callback) -> None:
    """Drop every pending registration of ``callback``."""
    with _lock:
        for name in list(_hooks):
            kept = [entry for entry in _hooks[name] if entry[0] is not callback]
            if kept:
                _hooks[name] = kept
            else:
                del _hooks[name]
        for index, (module, callbacks) in reversed(list(enumerate(_deferred))):
            kept = [entry for entry in callbacks if entry[0] is not callback]
            if kept:
                _deferred[index] = (module, kept)
            else:
                del _deferred[index]
