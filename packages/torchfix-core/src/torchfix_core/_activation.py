"""Activation entry points: ``torch.backends`` (end of ``import torch``), ``auto``, the launcher.

torch calls every ``torch.backends`` entry point at the end of ``import torch`` (2.5+) and turns
*any* exception into ``RuntimeError("Failed to load the backend extension ...")``, which breaks
``import torch`` for the user. So :func:`torch_backends_entry` catches everything (except with
``TORCHFIX_STRICT=1``, where failing loudly is the point), and does only cheap work: read the
environment, load data-only fix specs, register post-import hooks. It never imports
``torch._dynamo``, ``torch._inductor`` or any other heavy module.
"""

from __future__ import annotations

import logging

log = logging.getLogger("torchfix")


def activate_safely(source: str) -> None:
    """Activate; log and record instead of raising (strict mode re-raises ``TorchfixError``)."""
    from torchfix_core import _registry

    try:
        _registry.activate(source)
    except _registry.TorchfixError:
        raise
    except Exception as exc:  # noqa: BLE001 - import torch must keep working
        _registry._state.activation = {"source": "failed", "detail": f"activation raised {type(exc).__name__}: {exc}"}
        log.warning("torchfix: activation failed: %s: %s", type(exc).__name__, exc)


def torch_backends_entry() -> None:
    """The ``torch.backends`` entry point (registered by torchfix-core).

    ``TORCHFIX_AUTOLOAD=0`` is honoured before anything else, so that turning torchfix off costs
    nothing beyond importing this module and recording the state (no entry-point scan, no spec
    loading, no environment parsing). Only the values :mod:`torchfix_core._env` reads as false turn
    it off here; a malformed value is left to the settings parser, which warns and keeps the default
    (on), exactly as before.
    """
    import os

    raw = os.environ.get("TORCHFIX_AUTOLOAD")
    if raw is not None and raw.strip().lower() in _FALSE:
        from torchfix_core import _registry

        _registry._state.activation = {"source": "off", "detail": "TORCHFIX_AUTOLOAD=0"}
        return
    activate_safely("torch.backends")


#: the same as ``torchfix_core._env._FALSE`` (not imported from there: this check must cost nothing)
_FALSE = ("0", "false", "no", "off")
