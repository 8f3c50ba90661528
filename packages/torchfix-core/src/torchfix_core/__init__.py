"""torchfix-core: discovery, gating, activation and status of torchfix fixes.

Public API (everything else is private)::

    apply(only=None, exclude=None, *, strict=None) -> list[FixStatus]
    revert(only=None, exclude=None) -> list[FixStatus]
    status() -> list[FixStatus]             # FixStatus: frozen record; .state is a FixState
    activate() -> None                      # what import torch / torchfix_core.auto run
    activation() -> Activation              # how activation happened: (ActivationSource, detail)
    FixSpec, EnvSwitch                      # what a fix package declares: immutable records
    FixState, STATES, ActivationSource      # str enums (JSON shows their values)
    Effect                                  # what a fix changes (FixSpec.effect): runtime, compiled, cache-key
    Fix, ProbeResult, PatchSet, PatchRefused  # for fix implementations
    when_imported(name, callback)           # post-import hook
    report() -> dict                        # each fix's state and what it did in this process
    Signature                               # one way a bug shows itself (FixSpec.signatures)
    TorchfixError, TorchfixConfigWarning

Importing this package imports nothing at all: it is loaded at the end of ``import torch`` through
the ``torch.backends`` entry point (``torchfix_core._activation``), which must cost as little as
possible. The names above are resolved on first use (PEP 562 ``__getattr__``) from the private
module that defines them, so ``torchfix_core.status is torchfix_core._registry.status``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchfix_core._env import TorchfixConfigWarning
    from torchfix_core._import_hooks import when_imported
    from torchfix_core._registry import TorchfixError, apply, revert, status
    from torchfix_core._report import report
    from torchfix_core._states import STATES, ActivationSource, Effect, FixState
    from torchfix_core._status import Activation, FixStatus
    from torchfix_core.fix import Fix, ProbeResult
    from torchfix_core.patching import PatchRefused, PatchSet
    from torchfix_core.spec import EnvSwitch, FixSpec, Signature
    from torchfix_core.version import __version__

#: public name -> the module that defines it (imported on first access)
_LAZY = {
    "Activation": "torchfix_core._status",
    "ActivationSource": "torchfix_core._states",
    "TorchfixConfigWarning": "torchfix_core._env",
    "Effect": "torchfix_core._states",
    "when_imported": "torchfix_core._import_hooks",
    "TorchfixError": "torchfix_core._registry",
    "apply": "torchfix_core._registry",
    "revert": "torchfix_core._registry",
    "status": "torchfix_core._registry",
    "Fix": "torchfix_core.fix",
    "PatchRefused": "torchfix_core.patching",
    "PatchSet": "torchfix_core.patching",
    "ProbeResult": "torchfix_core.fix",
    "STATES": "torchfix_core._states",
    "EnvSwitch": "torchfix_core.spec",
    "FixSpec": "torchfix_core.spec",
    "Signature": "torchfix_core.spec",
    "report": "torchfix_core._report",
    "FixState": "torchfix_core._states",
    "FixStatus": "torchfix_core._status",
    "__version__": "torchfix_core.version",
}


def __getattr__(name: str) -> object:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def activate() -> None:
    """Discover installed fixes and apply each as soon as its trigger modules are imported.

    Idempotent (a no-op once activated by any path); safe to call from any thread. Never raises
    unless ``TORCHFIX_STRICT=1``. :func:`activation` then reports the source ``api``.
    """
    from torchfix_core._activation import ActivationSource, activate_safely

    activate_safely(ActivationSource.API)


def activation() -> Activation:
    """How torchfix was activated in this process: ``(source, detail)``, ``source`` an
    :class:`ActivationSource` (``none`` before activation, ``off``, ``failed``, ``torch.backends``,
    ``torchfix_core.auto``, ``torchfix-run`` or ``api``)."""
    from torchfix_core._activation import current

    return current()


__all__ = [
    "STATES",
    "Activation",
    "ActivationSource",
    "Effect",
    "EnvSwitch",
    "Fix",
    "FixSpec",
    "FixState",
    "FixStatus",
    "PatchRefused",
    "PatchSet",
    "ProbeResult",
    "Signature",
    "TorchfixConfigWarning",
    "TorchfixError",
    "__version__",
    "activate",
    "activation",
    "apply",
    "report",
    "revert",
    "status",
    "when_imported",
]
