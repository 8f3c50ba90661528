"""Activation: its entry points (``torch.backends`` at the end of ``import torch``, ``auto``, the
launcher) and the one record of how activation happened in this process.

torch calls every ``torch.backends`` entry point at the end of ``import torch`` (2.5+) and turns
*any* exception into ``RuntimeError("Failed to load the backend extension ...")``, which breaks
``import torch`` for the user. So :func:`torch_backends_entry` catches everything (except with
``TORCHFIX_STRICT=1``, where failing loudly is the point), and does only cheap work: read the
environment, load data-only fix specs, register post-import hooks. It never imports
``torch._dynamo``, ``torch._inductor`` or any other heavy module.

This module owns the activation record: :func:`record` is the only writer, :func:`current` the
reader (the registry, doctor and tests call them; nothing else stores it). Its source is an
:class:`~torchfix_core._states.ActivationSource` (re-exported here).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from torchfix_core._states import ActivationSource

if TYPE_CHECKING:
    from torchfix_core._status import Activation

log = logging.getLogger("torchfix")

__all__ = [
    "ActivationSource",
    "activate_safely",
    "current",
    "install_exit_hooks",
    "record",
    "source",
    "torch_backends_entry",
]

#: the sentence shown for each source that activates
DETAILS = {
    ActivationSource.TORCH_BACKENDS: "entry point in torch.backends, run at the end of import torch",
    ActivationSource.AUTO: "import torchfix_core.auto",
    ActivationSource.LAUNCHER: "the torchfix-run launcher",
    ActivationSource.API: "torchfix_core.activate()",
}

# the record, written only by record(): its source and the sentence saying what happened
_source = ActivationSource.NONE
_detail = "not activated in this process"


def record(source: ActivationSource, detail: str | None = None) -> None:
    """Set the activation record (the only writer)."""
    global _source, _detail
    _source, _detail = source, DETAILS.get(source, source.value) if detail is None else detail


def source() -> ActivationSource:
    """How activation happened (what the registry's re-entry guard reads)."""
    return _source


def current() -> Activation:
    """The activation record of this process, as a :class:`~torchfix_core._status.Activation`
    (built on request: readers are doctor, status users and tests, never ``import torch``)."""
    from torchfix_core._status import Activation

    return Activation(_source, _detail)


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


def activate_safely(source: ActivationSource) -> None:
    """Activate; log and record instead of raising (strict mode re-raises ``TorchfixError``)."""
    from torchfix_core import _registry

    try:
        _registry.activate(source)
    except _registry.TorchfixError:
        raise
    except Exception as exc:  # noqa: BLE001 - import torch must keep working
        record(ActivationSource.FAILED, f"activation raised {type(exc).__name__}: {exc}")
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
        record(ActivationSource.OFF, "TORCHFIX_AUTOLOAD=0")
        return
    activate_safely(ActivationSource.TORCH_BACKENDS)
