"""The one lock of torchfix: :data:`PATCH_LOCK`.

A leaf (it imports only ``threading``, which ``import torch`` has loaded): activation arms a
deferred activation under it at ``import torch``, the registry holds it around every state change,
and :mod:`torchfix_core.patching` around every patch and revert, so each of them imports it from
here without importing the others. Public as :data:`torchfix_core.patching.PATCH_LOCK` (and
:data:`torchfix_core.spec.PATCH_LOCK`).
"""

from __future__ import annotations

import threading

__all__ = ["PATCH_LOCK"]

#: Held while any torchfix patch or revert runs, and by the registry and activation around state
#: changes (re-entrant).
PATCH_LOCK = threading.RLock()
