"""``import torchfix_core.auto``: activate without torch's backend autoload.

For ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` or torch older than 2.5. Importing this module does not
import torch: activation runs right after ``import torch`` completes (at once if it already has).
Unlike the ``torch.backends`` path it ignores ``TORCHFIX_AUTOLOAD``, since importing it is an
explicit request.
"""

from __future__ import annotations

from torchfix_core._import_hooks import when_imported


def _activate(_torch: object) -> None:
    from torchfix_core._activation import ActivationSource, activate_safely
    from torchfix_core._env import requested_activation_source

    # TORCHFIX_ACTIVATION_SOURCE is set by torchfix-run; any other value means this import
    activate_safely(ActivationSource(requested_activation_source()))


when_imported("torch", _activate)
