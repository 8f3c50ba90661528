"""``import torchfix_core.auto``: activate without torch's backend autoload.

For ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` or torch older than 2.5. Importing this module does not
import torch: activation runs right after ``import torch`` completes (at once if it already has).
Unlike the ``torch.backends`` path it ignores ``TORCHFIX_AUTOLOAD``, since importing it is an
explicit request.
"""

from __future__ import annotations

import os

from torchfix_core._import_hooks import when_imported

# TORCHFIX_ACTIVATION_SOURCE is set by torchfix-run; any other value is ignored here and reported by
# the settings parser. The same tuple as torchfix_core._env.ACTIVATION_SOURCES, not imported from
# there: under torchfix-run this module is imported at the start of every Python child.
_ACCEPTED = ("torchfix_core.auto", "torchfix-run")
_requested = os.environ.get("TORCHFIX_ACTIVATION_SOURCE", "").strip()
SOURCE = _requested if _requested in _ACCEPTED else "torchfix_core.auto"


def _activate(_torch: object) -> None:
    from torchfix_core._activation import activate_safely

    activate_safely(SOURCE)


when_imported("torch", _activate)
