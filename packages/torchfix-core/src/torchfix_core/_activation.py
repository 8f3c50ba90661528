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
    """The ``torch.backends`` entry point (registered by torchfix-core)."""
    activate_safely("torch.backends")
