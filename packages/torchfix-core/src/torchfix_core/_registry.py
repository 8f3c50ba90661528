"""Process-wide state of every fix: discovery, gating, probe, apply, revert, status.

Life of a fix: discovered (its ``FixSpec`` loaded) -> ``disabled`` by the environment, or
``not-installed`` when its target library is absent, or ``pending`` with post-import hooks on its
triggers -> when the last trigger has been imported: version gate (``out-of-range`` unless forced),
load the implementation, ``probe()`` (``not-needed``), ``apply()`` -> ``applied``. Any exception
along the way -> ``failed`` with the reason, the fix's partial patches rolled back, and (only with
``TORCHFIX_STRICT=1``) a :class:`TorchfixError`.

Everything runs under :data:`torchfix_core.patching.PATCH_LOCK`.

Layering (``tests/test_layers.py``): the registry never imports :mod:`torchfix_core._activation`.
Activation reaches it through :func:`activate` alone, after recording its source; a deferred
activation's scan is taken back from :mod:`torchfix_core._discovery` (:func:`entries`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Iterable

from torchfix_core import _discovery, _env, _import_hooks
from torchfix_core._import_hooks import PATCH_LOCK
from torchfix_core._loading import Discovered, discover, family
from torchfix_core._states import Effect, FixState

if TYPE_CHECKING:
    from torchfix_core._states import ActivationSource
    from torchfix_core._status import FixStatus
    from torchfix_core.fix import Fix
    from torchfix_core.spec import FixSpec

APPLIED = FixState.APPLIED
PENDING = FixState.PENDING
NOT_NEEDED = FixState.NOT_NEEDED
OUT_OF_RANGE = FixState.OUT_OF_RANGE
DISABLED = FixState.DISABLED
FAILED = FixState.FAILED
NOT_INSTALLED = FixState.NOT_INSTALLED

# Imported when a fix is applied, not here: this module is loaded at ``import torch``, where each
# module costs about 0.1 ms. torchfix_core.fix / .patching (the implementation side) and
# ._versions (the version gate) are needed only once a trigger module has been imported.

log = logging.getLogger("torchfix")


class TorchfixError(RuntimeError):
    """A fix failed while ``TORCHFIX_STRICT=1`` (or ``strict=True``), or the API was misused."""


class _Entry:
    __slots__ = ("item", "state", "reason", "impl", "callback", "strict")

    def __init__(self, item: Discovered) -> None:
        self.item = item
        self.state = FAILED if item.error else PENDING
        self.reason = item.error or "torchfix is not activated in this process"
        self.impl: Fix | None = None
        self.callback: functools.partial[None] | None = None
        self.strict: bool | None = None  # the strict= of the apply() call that scheduled it

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def spec(self) -> FixSpec:
        assert self.item.spec is not None
        return self.item.spec


class _State:
    def __init__(self) -> None:
        self.entries: dict[str, _Entry] | None = None
        self.settings: _env.Settings | None = None
        self.activating = False
        self.activated = False  # activate() ran: calling it again is a no-op
        self.target_override: dict[str, dict[str, str]] = {}


_state = _State()


def _set(entry: _Entry, state: FixState, reason: str) -> None:
    entry.state, entry.reason = state, reason
    log.debug("%s: %s (%s)", entry.id, state, reason)


def discovered() -> bool:
    """Whether the fixes have been discovered in this process (a deferred activation is then moot)."""
    return _state.entries is not None


def entries() -> dict[str, _Entry]:
    """Discover once per process (cheap: entry points and data-only specs). Finishes a deferred
    activation first (:func:`activate`): whoever asks for the fixes sees them scheduled."""
    with PATCH_LOCK:
        armed = _take_deferral()
        if _state.entries is None:
            found = discover(armed.scanned if armed is not None else None)
            _state.entries = {d.id: _Entry(d) for d in found}
            specs = [e.item.spec for e in _state.entries.values() if e.item.spec is not None]
            switches = [switch for spec in specs for switch in spec.switches]
            _state.settings = _env.read_settings(_state.entries, switches=switches)
            _env.configure_logging(_state.settings.log_level)
            for problem in _state.settings.problems:
                _env.warn_once(problem)
            for entry in _state.entries.values():
                if entry.state == FAILED:
                    _env.warn_once(f"torchfix: fix {entry.id!r} is broken: {entry.reason}")
        if armed is not None:
            _finish_deferred(_state.entries, armed.index)
        return _state.entries


def _take_deferral() -> _discovery.Deferral | None:
    """Disarm a deferred activation (its wake hook cancelled) and return it, if one is armed."""
    armed = _discovery.take_deferral()
    if armed is not None:
        _import_hooks.cancel(armed.wake)
    return armed


def settings() -> _env.Settings:
    entries()
    assert _state.settings is not None
    return _state.settings


def _strict_raise(entry: _Entry, cause: BaseException | None, strict: bool | None) -> None:
    if strict if strict is not None else settings().strict:
        raise TorchfixError(f"torchfix fix {entry.id!r} failed: {entry.reason}") from cause


def _gate(entry: _Entry) -> tuple[bool, str]:
    """Version gate. Returns (go on?, note). Sets out-of-range itself."""
    from torchfix_core import _versions

    notes = []
    targets = _state.target_override.get(entry.id, entry.spec.targets)
    for module_name, specifier in targets.items():
        verdict, why = _versions.judge_installed(module_name, specifier, module_name in entry.spec.unversioned)
        if verdict is _versions.Verdict.OUT_OF_RANGE:
            if settings().is_forced(entry.id):
                notes.append(f"{why}, forced by TORCHFIX_FORCE")
                continue
            _set(entry, OUT_OF_RANGE, f"{why}; TORCHFIX_FORCE={entry.id} applies it anyway (the probe still runs)")
            return False, ""
        if verdict is _versions.Verdict.AMBIGUOUS:
            notes.append(why)
    return True, "; ".join(notes)


def _load_impl(entry: _Entry) -> Fix:
    from torchfix_core.fix import Fix

    if entry.impl is None:
        module_name, _, attr = entry.spec.implementation.partition(":")
        cls = getattr(importlib.import_module(module_name), attr)
        impl = cls(entry.id)
        if not isinstance(impl, Fix):
            raise TypeError(f"{entry.spec.implementation} is not a torchfix_core.Fix subclass")
        entry.impl = impl
    return entry.impl


def _apply_now(entry: _Entry, strict: bool | None = None) -> None:
    with PATCH_LOCK:
        if entry.state != PENDING:
            return
        step = "version gate"
        try:
            go, note = _gate(entry)
            if not go:
                return
            step = "loading the implementation"
            impl = _load_impl(entry)
            step = "probe"
            result = impl.probe()
            reason = f"{result.reason}; {note}" if note else result.reason
            if not result.needed:
                _set(entry, NOT_NEEDED, reason)
                return
            keyed = _keys_compile_caches(entry)
            try:
                if keyed:
                    # before any patch: a fix whose artifacts a warm cache could undo is not applied
                    step = "keying the compile caches"
                    from torchfix_core import _cache_key

                    _cache_key.add_term(entry.id, entry.item.version, impl)
                step = "apply"
                impl.apply()
            except BaseException:
                impl.patches.revert()
                if keyed:
                    _cache_key.remove_term(entry.id)
                raise
            _set(entry, APPLIED, reason)
            log.info("torchfix: applied %s (%s)", entry.id, reason)
        except Exception as exc:  # noqa: BLE001 - any failure becomes a recorded state
            from torchfix_core.patching import PatchRefused

            kind = "refused" if isinstance(exc, PatchRefused) else f"{step} raised {type(exc).__name__}"
            _set(entry, FAILED, f"{kind}: {exc}")
            log.warning("torchfix: fix %r failed: %s", entry.id, entry.reason)
            _strict_raise(entry, exc, strict)


def _keys_compile_caches(entry: _Entry) -> bool:
    """Whether the fix changes what torch compiles (``Effect.COMPILED``): the registry keys the FX
    graph and AOTAutograd caches on it while it is applied (:mod:`torchfix_core._cache_key`)."""
    return entry.spec.effect is Effect.COMPILED


def settle_missing_trigger(fix_id: str, module_name: str) -> None:
    """A trigger module of the pending fix ``fix_id`` does not exist in this installation (an import
    raised ``ModuleNotFoundError`` for it): the fix would wait forever. Judge it now: ``out-of-range``
    when the version gate says so, else ``not-needed`` (the code it patches is absent here). Its
    post-import hook stays; it can never fire. Called by doctor when it resolves triggers."""
    with PATCH_LOCK:
        entry = entries()[fix_id]
        if entry.state != PENDING:
            return
        go, note = _gate(entry)
        if go:
            reason = f"{module_name} does not exist in this installation: the code this fix patches is absent"
            _set(entry, NOT_NEEDED, f"{reason}; {note}" if note else reason)


def _on_trigger(fix_id: str, _module: ModuleType) -> None:
    entry = entries()[fix_id]
    if all(name in sys.modules for name in entry.spec.triggers):
        _apply_now(entry, entry.strict)


def _on_hook_error(fix_id: str, exc: BaseException) -> None:
    if isinstance(exc, TorchfixError):
        raise exc
    entry = entries()[fix_id]
    _set(entry, FAILED, f"post-import hook raised {type(exc).__name__}: {exc}")
    log.warning("torchfix: fix %r failed: %s", fix_id, entry.reason)


def _schedule(entry: _Entry, strict: bool | None = None, found: dict[str, bool] | None = None) -> None:
    """Move a fix to pending and hook its triggers, or apply it at once when they are imported."""
    entry.strict = strict
    disabled, why = settings().is_disabled(entry.id)
    if disabled:
        _set(entry, DISABLED, why)
        return
    for module_name in _state.target_override.get(entry.id, entry.spec.targets):
        if module_name in sys.modules:
            continue
        # ``found``: one lookup per library per activation (several fixes share a target library)
        installed = None if found is None else found.get(module_name)
        if installed is None:
            installed = importlib.util.find_spec(module_name) is not None
            if found is not None:
                found[module_name] = installed
        if not installed:
            _set(entry, NOT_INSTALLED, f"{module_name} is not installed")
            return
    missing = [name for name in entry.spec.triggers if name not in sys.modules]
    _set(
        entry,
        PENDING,
        f"waiting for {', '.join(missing)} to be imported" if missing else "waiting for imports in progress to finish",
    )
    entry.callback = functools.partial(_on_trigger, entry.id)
    on_error = functools.partial(_on_hook_error, entry.id)
    for name in missing or entry.spec.triggers[-1:]:
        # fires at once when the module is imported and no other import is in progress (the usual
        # case for an API call), else when the imports in progress have finished
        _import_hooks.when_imported(name, entry.callback, on_error)


def _select(only: Iterable[str] | None, exclude: Iterable[str] | None) -> list[_Entry]:
    known = entries()
    only_list = None if only is None else ([only] if isinstance(only, str) else list(only))
    exclude_list = [] if exclude is None else ([exclude] if isinstance(exclude, str) else list(exclude))
    unknown = [i for i in (only_list or []) + exclude_list if i not in known]
    if unknown:
        raise TorchfixError(f"unknown fix id(s) {unknown}; installed: {sorted(known) or 'none'}")
    return [e for i, e in known.items() if (only_list is None or i in only_list) and i not in exclude_list]


def apply(
    only: Iterable[str] | None = None, exclude: Iterable[str] | None = None, *, strict: bool | None = None
) -> list[FixStatus]:
    """Apply the selected installed fixes now, or as soon as their trigger modules are imported.

    Fixes the environment disables stay disabled; broken fixes stay failed. Re-applying an applied
    fix is a no-op. Raises :class:`TorchfixError` for unknown ids, and for a failing fix when
    ``strict`` (default: ``TORCHFIX_STRICT``).
    """
    with PATCH_LOCK:
        selected = _select(only, exclude)
        for entry in selected:
            if entry.item.error:
                _strict_raise(entry, None, strict)
                continue
            if entry.state in (APPLIED, PENDING) and (entry.state == APPLIED or entry.callback is not None):
                continue
            entry.state = PENDING
            _schedule(entry, strict)
        return [_row(e) for e in selected]


def revert(only: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> list[FixStatus]:
    """Undo the selected fixes (newest first) and cancel their pending hooks.

    Afterwards every patched attribute is the original object again and every selected fix that was
    scheduled is ``disabled`` (reason: reverted) until :func:`apply` is called, whatever its state
    was (applied, pending, not-needed or out-of-range); failed and not-installed fixes keep their state. A fix whose patch was overwritten by somebody
    else is left alone and shown ``failed`` with the reason.
    """
    with PATCH_LOCK:
        selected = _select(only, exclude)
        for entry in reversed(selected):
            if entry.callback is not None:
                _import_hooks.cancel(entry.callback)
                entry.callback = None
            if entry.state == APPLIED and entry.impl is not None:
                problems = entry.impl.revert()
                if _keys_compile_caches(entry):
                    from torchfix_core import _cache_key

                    problems += _cache_key.remove_term(entry.id)
                if problems:
                    _set(entry, FAILED, "revert incomplete: " + "; ".join(problems))
                    continue
            if entry.state in (APPLIED, PENDING, NOT_NEEDED, OUT_OF_RANGE):
                _set(entry, DISABLED, "reverted by torchfix_core.revert()")
        return [_row(e) for e in selected]


def _row(entry: _Entry) -> FixStatus:
    from torchfix_core._status import FixStatus

    spec = entry.item.spec
    reason = entry.reason
    if entry.impl is not None and entry.state == APPLIED:
        try:
            note = entry.impl.runtime_note()
        except Exception as exc:  # noqa: BLE001 - status must always answer
            note = f"runtime_note raised {type(exc).__name__}: {exc}"
        if note:
            reason = f"{reason}; {note}"
        if _keys_compile_caches(entry):
            reason = f"{reason}; {_key_note(entry)}"
    return FixStatus(
        id=entry.id,
        distribution=entry.item.distribution,
        version=entry.item.version,
        state=entry.state,
        reason=reason,
        targets=dict(spec.targets) if spec else {},
        upstream=spec.upstream if spec else (),
        summary=spec.summary if spec else "",
    )


def _key_note(entry: _Entry) -> str:
    """What an applied compiled-effect fix's row says about the compile caches."""
    from torchfix_core import _cache_key

    version = _cache_key.terms().get(entry.id)
    if version is None:
        return "compile caches NOT keyed on this fix (its key term is gone): a warm cache may serve artifacts compiled without it"
    return (
        f"FX graph and AOTAutograd cache keys carry its term ({entry.id} {version}): artifacts compiled "
        "without it are not served"
    )


def status() -> list[FixStatus]:
    """One row per installed fix (in application order) and per absent member of the family (the
    fix ids that installed packages list in entry-point group ``torchfix.family``: torchfix-all's)."""
    from torchfix_core._status import FixStatus

    with PATCH_LOCK:
        rows = [_row(e) for e in entries().values()]
        present = {r.id for r in rows}
        for fix_id, distribution in family().items():
            if fix_id not in present:
                rows.append(
                    FixStatus(fix_id, distribution, None, NOT_INSTALLED, f"{distribution} is not installed", {}, (), "")
                )
        return rows


def activate(source: ActivationSource | str) -> None:
    """Discover and schedule every fix now; never raises except in strict mode. Re-entry and any
    later call are no-ops. The activation path's one entry point into the registry
    (:func:`torchfix_core._activation.activate_safely` records ``source`` and installs the exit hooks
    first; a deferred activation's wake hook calls it too).

    Activation calls this when it cannot be deferred (its docstring says when it can: then nothing is
    loaded until the first trigger module is imported or a caller asks for the fixes, and
    :func:`entries` finishes the deferred activation, scheduling every fix exactly as an immediate
    activation would have done at that moment. Nothing can happen to any fix before one of its
    trigger modules is imported, so the outcome is the same; ``import torch`` is spared the spec
    loading: docs/performance.md).
    """
    with PATCH_LOCK:
        if _state.activating or _state.activated:
            return
        _state.activating = _state.activated = True
        try:
            log.debug("activating (%s)", source)
            _schedule_all(entries())
        finally:
            _state.activating = False


def _finish_deferred(found: dict[str, _Entry], index: dict[str, str]) -> None:
    """Schedule every fix (first caller of :func:`entries` after a deferred activation, its wake hook
    already cancelled); a spec whose first trigger differs from its trigger-index entry is reported."""
    for entry in found.values():
        published = index.get(entry.id)
        if entry.item.spec is not None and published is not None and published != entry.spec.triggers[0]:
            _env.warn_once(
                f"torchfix: fix {entry.id!r} publishes trigger {published!r} in its distribution's "
                f"torchfix.triggers entry point but its spec's first trigger is {entry.spec.triggers[0]!r}; "
                "reinstall the package (its metadata is stale)"
            )
    _schedule_all(found)


def _schedule_all(found: dict[str, _Entry]) -> None:
    """Schedule every discovered fix that waits (what activation does)."""
    libraries: dict[str, bool] = {}
    for entry in found.values():
        if entry.item.error:
            _strict_raise(entry, None, None)
        elif entry.state == PENDING and entry.callback is None:
            _schedule(entry, found=libraries)


def override_targets_for_tests(fix_id: str, targets: dict[str, str]) -> None:
    """Test hook (used by :mod:`torchfix_core.testing`): from now on, judge ``fix_id``'s validated range
    with ``targets`` instead of its spec's (e.g. ``{"torch": "<1.0"}`` to see it out of range)."""
    entries()
    _state.target_override[fix_id] = dict(targets)
