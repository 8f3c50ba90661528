"""The state types and the patch lock: what activation at ``import torch`` needs of the core's types.

:class:`FixState` (every state a fix can be in) and :class:`ActivationSource` (how activation
happened) are ``str`` enums whose members equal, print as and serialize (JSON) as their value.
Public through :mod:`torchfix_core` and :mod:`torchfix_core.spec`; defined here, apart from the
records of :mod:`torchfix_core.spec`, because activation records its source and holds
:data:`PATCH_LOCK` without building any record: the records (frozen slotted dataclasses) are
created when the fixes' specs are first loaded, which a deferred activation postpones
(docs/design.md, "Activation").
"""

from __future__ import annotations

import enum
import sys
import threading

__all__ = ["PATCH_LOCK", "STATES", "ActivationSource", "FixState", "StrEnum"]

#: Held while any torchfix patch or revert runs, and by the registry around state changes
#: (re-entrant). Public as :data:`torchfix_core.patching.PATCH_LOCK`; defined here, in the one
#: module that discovery loads anyway, so that activation at ``import torch`` does not have to
#: import the patching layer.
PATCH_LOCK = threading.RLock()


if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same behaviour

    class StrEnum(str, enum.Enum):
        """``enum.StrEnum`` of Python 3.11: members equal, print as and format as their value."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, format_spec: str) -> str:
            return format(str(self.value), format_spec)


class FixState(StrEnum):
    """Every state a fix can be in, as shown by :func:`torchfix_core.status` and ``torchfix-doctor``."""

    APPLIED = "applied"
    PENDING = "pending"
    NOT_NEEDED = "not-needed"
    OUT_OF_RANGE = "out-of-range"
    DISABLED = "disabled"
    FAILED = "failed"
    NOT_INSTALLED = "not-installed"


#: every state, in the order doctor explains them (``tuple(FixState)``)
STATES = tuple(FixState)


class ActivationSource(StrEnum):
    """How torchfix was (or was not) activated in this process."""

    NONE = "none"  # not activated (yet)
    OFF = "off"  # turned off (TORCHFIX_AUTOLOAD=0, or torch's autoload off without torchfix_core.auto)
    FAILED = "failed"  # activation raised; torch still imported
    TORCH_BACKENDS = "torch.backends"
    AUTO = "torchfix_core.auto"
    LAUNCHER = "torchfix-run"
    API = "api"

    @property
    def active(self) -> bool:
        """True when activation ran (fixes were discovered and scheduled)."""
        return self not in (ActivationSource.NONE, ActivationSource.OFF, ActivationSource.FAILED)
