"""The state types: :class:`FixState` (every state a fix can be in) and :class:`ActivationSource`
(how activation happened), ``str`` enums whose members equal, print as and serialize (JSON) as
their value, and :class:`Effect` (what a fix changes: run time, compiled code, cache keys). Public through :mod:`torchfix_core` and :mod:`torchfix_core.spec`; defined apart from
the records of :mod:`torchfix_core.spec` because the registry needs them without building any
record (the records, frozen slotted dataclasses, are created when the fixes' specs are first
loaded). A deferred activation at ``import torch`` imports neither (creating the enum classes
costs about 0.5 ms): it records the source's string value (docs/design.md, "Activation").

A leaf: it imports nothing from torchfix_core (``tests/test_layers.py`` checks it), so every layer
may use the states. :data:`~torchfix_core._import_hooks.PATCH_LOCK` lives in the other leaf,
:mod:`torchfix_core._import_hooks`, which activation loads at ``import torch`` without these classes.
"""

from __future__ import annotations

import enum
import sys

__all__ = ["STATES", "ActivationSource", "Effect", "FixState", "StrEnum"]


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


class Effect(StrEnum):
    """What a fix changes, which decides whether the compile caches must be keyed on it.

    ``runtime``: it acts while the program runs (hooks, dispatch modes, a context, an autograd or
    checkpoint path); what torch compiles and caches is unchanged, or changes only through the
    graph torch traces, which the keys already hash. ``compiled``: it changes what torch compiles
    from the same graph (a partition, generated code), which torch's FX graph and AOTAutograd cache
    keys cannot see: the registry adds the fix's term to both keys while it is applied
    (:mod:`torchfix_core._cache_key`). ``cache-key``: it changes how torch keys or looks up
    compiled artifacts (a key term, a bypass); its keys differ from unpatched torch's by
    construction, so entries from either side are not served to the other.
    """

    RUNTIME = "runtime"
    COMPILED = "compiled"
    CACHE_KEY = "cache-key"
