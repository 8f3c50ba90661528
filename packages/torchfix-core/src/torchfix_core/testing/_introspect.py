"""Read-only views of the core's state for tests (the documented test hooks; nothing here is used
by the core itself, so none of it runs in a training process).

* :func:`fix_spec`, :func:`import_triggers` - a discovered fix's spec; import its trigger modules
* :func:`live_patches` - ``(owner, name, original)`` of every patch a fix (or every fix) holds
* :func:`cache_key_terms` - the compile caches' key terms in force; :func:`cache_key_patches` the
  core's one patch that carries them
* :func:`waiting_hooks` - module name -> number of post-import callbacks still waiting for it
* :func:`override_targets` - judge a fix's validated range with other targets (out-of-range cases)
* :func:`outside_validated_range` - the registry's own range judgement for a fix on this machine
"""

from __future__ import annotations

import importlib
from typing import Any

from torchfix_core.spec import FixSpec


def fix_spec(fix_id: str) -> FixSpec:
    """The spec of discovered fix ``fix_id``; AssertionError when it is not installed or broken."""
    from torchfix_core import _registry

    entry = _registry.entries().get(fix_id)
    if entry is None or entry.item.spec is None:
        raise AssertionError(f"fix {fix_id!r} is not installed (or its spec cannot be loaded)")
    return entry.item.spec


def import_triggers(fix_id: str | None = None, *, ignore_missing: bool = False) -> None:
    """Import the trigger modules of ``fix_id`` (default: of every installed fix), so that each
    reaches its final state; ``ignore_missing`` skips triggers of libraries that are not installed."""
    from torchfix_core import _registry

    ids = [fix_id] if fix_id is not None else [i for i, e in _registry.entries().items() if e.item.spec]
    for one in ids:
        for name in fix_spec(one).triggers:
            try:
                importlib.import_module(name)
            except ImportError:
                if not ignore_missing:
                    raise


def live_patches(fix_id: str | None = None) -> list[tuple[object, str, Any]]:
    """``(owner, name, original)`` for every live patch of ``fix_id`` (default: every applied fix),
    in the order they were made; ``name`` is ``"__code__"`` for a code replacement. A fix that holds
    a compile-cache key term (effect ``compiled``) also holds the core's key patch, listed after its
    own (once, for the default)."""
    from torchfix_core import _registry
    from torchfix_core.spec import PATCH_LOCK

    with PATCH_LOCK:
        entries = _registry.entries()
        chosen = [entries[fix_id]] if fix_id is not None else list(entries.values())
        found = [
            (record.owner, record.name, record.original)
            for entry in chosen
            if entry.impl is not None
            for record in entry.impl.patches._records.values()
        ]
        if any(entry.id in cache_key_terms() for entry in chosen):
            found += cache_key_patches()
        return found


def cache_key_terms() -> dict[str, str]:
    """Fix id -> version of every term the FX graph and AOTAutograd cache keys carry now (empty
    when no compiled-effect fix is applied, or the key module was never loaded)."""
    import sys

    module = sys.modules.get("torchfix_core._cache_key")
    return {} if module is None else dict(module.terms())


def cache_key_patches() -> list[tuple[object, str, Any]]:
    """``(owner, name, original)`` of the core's key patch while a term is held (else empty): one
    patch point shared by every compiled-effect fix."""
    import sys

    module = sys.modules.get("torchfix_core._cache_key")
    return [] if module is None else list(module.key_patches())


def waiting_hooks() -> dict[str, int]:
    """Module name -> number of post-import callbacks still waiting for it."""
    from torchfix_core import _import_hooks

    with _import_hooks._lock:
        waiting = {name: len(entries) for name, entries in _import_hooks._hooks.items()}
        for module, callbacks in _import_hooks._deferred:
            waiting[module.__name__] = waiting.get(module.__name__, 0) + len(callbacks)
        return waiting


def override_targets(fix_id: str, targets: dict[str, str]) -> None:
    """From now on judge ``fix_id``'s validated range with ``targets`` (e.g. ``{"torch": "<1.0"}``)."""
    from torchfix_core import _registry

    _registry.override_targets_for_tests(fix_id, targets)


def outside_validated_range(fix_id: str) -> str | None:
    """Why the fix is outside its validated range on the installed libraries (the registry's own
    judgement, :func:`torchfix_core._versions.outside_range`), or None when it is inside (or a
    version is unknown: the probe decides)."""
    from torchfix_core import _versions

    spec = fix_spec(fix_id)
    return _versions.outside_range(dict(spec.targets), spec.unversioned)
