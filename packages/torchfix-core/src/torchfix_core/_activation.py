"""Activation: its entry points (``torch.backends`` at the end of ``import torch``, ``auto``, the
launcher) and the one record of how activation happened in this process.

torch calls every ``torch.backends`` entry point at the end of ``import torch`` (2.5+) and turns
*any* exception into ``RuntimeError("Failed to load the backend extension ...")``, which breaks
``import torch`` for the user. So :func:`torch_backends_entry` catches everything (except with
``TORCHFIX_STRICT=1``, where failing loudly is the point), and does only cheap work: read the
environment, load data-only fix specs, register post-import hooks. It never imports
``torch._dynamo``, ``torch._inductor`` or any other heavy module.

This module owns the activation record: :func:`record` is the only writer, :func:`current` the
reader (doctor, :func:`torchfix_core.activation` and tests call it; nothing else stores it). Its source is an
:class:`~torchfix_core._states.ActivationSource` (re-exported here, resolved on first use), kept
as the member's string value so that the record costs no enum at ``import torch``.

It also arms a **deferred activation** (:func:`activate_safely`, docs/design.md "Activation"):
when every installed fix publishes its first trigger module in the trigger index, none of those
modules is imported yet and no ``TORCHFIX_*`` variable needs judging, activation scans the entry
points, registers one post-import hook on those modules, hands the scan to
:mod:`torchfix_core._discovery` (:func:`torchfix_core._discovery.defer`) and returns, importing only
``_env``, ``_discovery`` and ``_import_hooks``; the registry (and the state types) are
imported when the hook fires or a caller asks for the fixes (the registry then takes the scan
back: :func:`torchfix_core._discovery.take_deferral`).

Layering (``tests/test_layers.py``): this module is above the registry. It reaches the registry
through one entry point, :func:`torchfix_core._registry.activate` (:func:`_schedule`), and the
registry never imports it; :data:`PATCH_LOCK` comes from the leaf :mod:`torchfix_core._import_hooks`,
imported when activation runs (a ``TORCHFIX_AUTOLOAD=0`` run does not load it).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    from torchfix_core._discovery import Deferral
    from torchfix_core._states import ActivationSource
    from torchfix_core._status import Activation

log = logging.getLogger("torchfix")

__all__ = [
    "ActivationSource",
    "activate_safely",
    "current",
    "deferral",
    "install_exit_hooks",
    "record",
    "source",
    "torch_backends_entry",
]

#: the sentence shown for each source that activates (keys: ``ActivationSource`` values)
DETAILS = {
    "torch.backends": "entry point in torch.backends, run at the end of import torch",
    "torchfix_core.auto": "import torchfix_core.auto",
    "torchfix-run": "the torchfix-run launcher",
    "api": "torchfix_core.activate()",
}
#: the sources that did not activate (``ActivationSource.NONE`` / ``OFF``): activation may still run
NOT_ACTIVATED = ("none", "off")

# the record, written only by record(): its source (an ActivationSource value) and the sentence
_source = "none"
_detail = "not activated in this process"


def __getattr__(name: str) -> Any:
    if name == "ActivationSource":  # re-exported, resolved on first use (not at import torch)
        from torchfix_core._states import ActivationSource

        return ActivationSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record(source: ActivationSource | str, detail: str | None = None) -> None:
    """Set the activation record (the only writer). ``source`` is an ``ActivationSource`` or its value."""
    global _source, _detail
    value = str(source)  # a StrEnum member prints as its value
    _source, _detail = value, DETAILS.get(value, value) if detail is None else detail


def source() -> ActivationSource:
    """How activation happened."""
    from torchfix_core._states import ActivationSource

    return ActivationSource(_source)


def activated() -> bool:
    """Whether an activation ran or is armed in this process (the re-entry guard; no enum)."""
    return _source not in NOT_ACTIVATED


def current() -> Activation:
    """The activation record of this process, as a :class:`~torchfix_core._status.Activation`
    (built on request: readers are doctor, status users and tests, never ``import torch``)."""
    from torchfix_core._status import Activation

    return Activation(source(), _detail)


def deferral() -> Deferral | None:
    """The armed deferred activation, if any (read by tests; kept by :mod:`torchfix_core._discovery`)."""
    from torchfix_core import _discovery

    return _discovery.deferral()


def _arm_deferral(source: str) -> bool:
    """Arm a deferred activation (module docstring); False when the specs must load now: a
    ``TORCHFIX_*`` variable needs judging, a fix publishes no first trigger, one of the trigger
    modules is imported already, or the registry has discovered the fixes already."""
    from torchfix_core import _discovery, _env, _import_hooks

    registry = sys.modules.get("torchfix_core._registry")
    if registry is not None and registry.discovered():
        return False
    if not _env.quiet():
        return False
    scanned = _discovery.scan_groups((_discovery.GROUP, _discovery.TRIGGERS_GROUP))
    fixes = scanned[_discovery.GROUP]
    wake = _discovery.wake_modules(fixes, scanned[_discovery.TRIGGERS_GROUP])
    if not fixes or wake is None or any(name in sys.modules for name in wake):
        return False
    index = {str(ep.name): str(ep.value).strip() for ep in scanned[_discovery.TRIGGERS_GROUP]}  # type: ignore[attr-defined]
    record(source)
    install_exit_hooks()
    _discovery.defer(_discovery.Deferral(fixes, index, _wake))
    for name in wake:
        _import_hooks.when_imported(name, _wake, _on_wake_error)
    return True


def _schedule(source: ActivationSource | str) -> None:
    """The activation path's one entry point into the registry: load the specs and schedule every
    fix (:func:`torchfix_core._registry.activate`; it finishes an armed deferred activation)."""
    from torchfix_core import _registry

    _registry.activate(source)


def _strict_error(exc: BaseException) -> bool:
    """Whether ``exc`` is strict mode's ``TorchfixError``, which must propagate. It can only come from
    the registry, so an unloaded registry means no (nothing is imported to ask)."""
    registry = sys.modules.get("torchfix_core._registry")
    return registry is not None and isinstance(exc, registry.TorchfixError)


def _wake(_module: ModuleType) -> None:
    """Post-import hook of a deferred activation: load the specs and schedule every fix."""
    _schedule(_source)


def _on_wake_error(exc: BaseException) -> None:
    if _strict_error(exc):
        raise exc
    record("failed", f"deferred activation raised {type(exc).__name__}: {exc}")
    log.warning("torchfix: activation failed: %s: %s", type(exc).__name__, exc)


def _note(exc: BaseException | None) -> None:
    """Print the known-bug note for ``exc`` (imported only now, when a process is failing)."""
    if exc is None:
        return
    try:
        from torchfix_core._explain import print_diagnosis

        print_diagnosis(exc)
    except BaseException:  # noqa: BLE001 - a dying process must not get a second failure
        pass


def install_exit_hooks() -> None:
    """At activation: chain the uncaught-exception note onto ``sys.excepthook`` and
    ``threading.excepthook`` (unless ``TORCHFIX_EXPLAIN=0``), and register the report writer
    with ``atexit`` when ``TORCHFIX_REPORT`` names a directory.

    Cheap (no import beyond ``sys``/``os``/``threading``/``atexit``, which ``import torch`` has
    loaded): the note's code is imported only when an exception reaches the hook. The previous
    hook runs first with the same arguments, so the traceback is printed as before and the
    exception is neither changed nor swallowed; a hook set later by the user replaces ours.
    Idempotent."""
    import os
    import sys
    import threading

    from torchfix_core._env import parse_bool_word

    if parse_bool_word(os.environ.get("TORCHFIX_EXPLAIN")) is not False:
        if not getattr(sys.excepthook, "_torchfix_note", False):
            previous = sys.excepthook

            def torchfix_excepthook(exc_type: type[BaseException], exc: BaseException, tb: object) -> None:
                previous(exc_type, exc, tb)  # type: ignore[arg-type]
                _note(exc)

            torchfix_excepthook._torchfix_note = True  # type: ignore[attr-defined]
            sys.excepthook = torchfix_excepthook
        if not getattr(threading.excepthook, "_torchfix_note", False):
            previous_thread = threading.excepthook

            def torchfix_thread_excepthook(args: threading.ExceptHookArgs) -> None:
                previous_thread(args)
                if args.exc_type is not SystemExit:
                    _note(args.exc_value)

            torchfix_thread_excepthook._torchfix_note = True  # type: ignore[attr-defined]
            threading.excepthook = torchfix_thread_excepthook
    if os.environ.get("TORCHFIX_REPORT", "").strip() and not _report_registered:
        _register_report()


_report_registered = False


def _register_report() -> None:
    global _report_registered
    import atexit

    def write_report() -> None:
        from torchfix_core._report import write_at_exit

        write_at_exit()

    atexit.register(write_report)
    _report_registered = True


def activate_safely(source: ActivationSource | str) -> None:
    """Activate (deferred when it can be: :func:`_arm_deferral`, else: record the source, install the
    exit hooks and schedule every fix through the registry, all under ``PATCH_LOCK``); a no-op once
    activated. Logs and records instead of raising (strict mode re-raises
    ``TorchfixError``)."""
    from torchfix_core._import_hooks import PATCH_LOCK

    try:
        with PATCH_LOCK:
            if activated() or _arm_deferral(str(source)):
                return
            record(source)  # first: a re-entrant activation (a fix importing torch) is a no-op
            install_exit_hooks()
            _schedule(source)
    except Exception as exc:  # noqa: BLE001 - import torch must keep working
        if _strict_error(exc):
            raise
        record("failed", f"activation raised {type(exc).__name__}: {exc}")
        log.warning("torchfix: activation failed: %s: %s", type(exc).__name__, exc)


def torch_backends_entry() -> None:
    """The ``torch.backends`` entry point (registered by torchfix-core).

    ``TORCHFIX_AUTOLOAD=0`` is honoured before anything else, so that turning torchfix off costs
    nothing beyond importing this module and recording the state (no entry-point scan, no spec
    loading). A malformed value is left to the settings parser, which warns and keeps the default
    (on).
    """
    from torchfix_core._env import autoload

    if not autoload():
        record("off", "TORCHFIX_AUTOLOAD=0")
        return
    activate_safely("torch.backends")
