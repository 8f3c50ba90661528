"""Post-import hooks: run a callback right after a module finishes importing.

:func:`when_imported` fires at once if the module is already in ``sys.modules``; otherwise a
``sys.meta_path`` finder wraps the module's loader so that the callback runs right after
``exec_module`` returns (the module is complete, and the importer has not seen it yet). The
loader is restored on the module afterwards, so ``module.__loader__`` and ``__spec__.loader`` are
torch's own. Nothing here imports the watched module.

Callbacks must not raise; if one does, the exception is passed to the ``on_error`` callback given
at registration (the registry records it as a failed fix) and the import still succeeds.
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

_lock = threading.RLock()
_hooks: dict[str, list[tuple[Callback, ErrorCallback | None]]] = {}
_resolving = threading.local()


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
        _fire(module, callbacks)


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
    """Call ``callback(module)`` once ``name`` is imported: now if it already is, else right after
    its first import completes. Each registration fires at most once."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append((callback, on_error))
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    _fire(module, [(callback, on_error)])


def cancel(callback: Callback) -> None:
    """Drop every pending registration of ``callback``."""
    with _lock:
        for name in list(_hooks):
            kept = [entry for entry in _hooks[name] if entry[0] is not callback]
            if kept:
                _hooks[name] = kept
            else:
                del _hooks[name]


def pending() -> dict[str, int]:
    """Module name -> number of callbacks still waiting for it (for doctor and tests)."""
    with _lock:
        return {name: len(entries) for name, entries in _hooks.items()}
