"""torchfix-core: discovery, gating, activation and status of torchfix fixes.

Public API (everything else is private)::

    apply(only=None, exclude=None, *, strict=None) -> list[FixStatus]
    revert(only=None, exclude=None) -> list[FixStatus]
    status() -> list[FixStatus]
    activate(source="api") -> None          # what import torch / torchfix_core.auto run
    FixSpec, ProbeResult, FixStatus, STATES # cheap metadata (torchfix_core.spec)
    Fix, PatchSet, PatchRefused             # for fix implementations
    when_imported(name, callback)           # post-import hook
    TorchfixError, TorchfixConfigWarning

Importing this package imports no part of torch and nothing heavy: it is loaded at the end of
``import torch`` through the ``torch.backends`` entry point.
"""

from __future__ import annotations

from torchfix_core._env import TorchfixConfigWarning
from torchfix_core._import_hooks import when_imported
from torchfix_core._registry import TorchfixError, apply, revert, status
from torchfix_core.fix import Fix
from torchfix_core.patching import PatchRefused, PatchSet
from torchfix_core.spec import STATES, FixSpec, FixStatus, ProbeResult
from torchfix_core.version import __version__


def activate(source: str = "api") -> None:
    """Discover installed fixes and apply each as soon as its trigger modules are imported.

    Idempotent; safe to call from any thread. Never raises unless ``TORCHFIX_STRICT=1``.
    """
    from torchfix_core._activation import activate_safely

    activate_safely(source)


__all__ = [
    "STATES",
    "Fix",
    "FixSpec",
    "FixStatus",
    "PatchRefused",
    "PatchSet",
    "ProbeResult",
    "TorchfixConfigWarning",
    "TorchfixError",
    "__version__",
    "activate",
    "apply",
    "revert",
    "status",
    "when_imported",
]
