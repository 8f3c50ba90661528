"""Cheap, data-only description of a fix: what an entry point in ``torchfix.fixes`` loads.

A fix package's ``package.py`` builds one :class:`FixSpec` (and the :class:`EnvSwitch` records it
declares) and nothing else. Loading it must not import torch, the patched library, or the fix's
implementation: this module imports only the standard library (modules torch has loaded already),
so that discovery at ``import torch`` costs microseconds per fix.

Also here, because activation needs them (one module: each module costs ~0.1 ms at ``import torch``):
the state types :class:`FixState` (every state a fix can be in) and :class:`ActivationSource` (how
activation happened), both ``str`` enums whose members equal, print as and serialize (JSON) as their
value, and :data:`PATCH_LOCK`. The records that only the implementation
side and ``status()`` use (:class:`~torchfix_core.fix.ProbeResult`,
:class:`~torchfix_core._status.FixStatus`, frozen slotted dataclasses) live in the modules that use
them and are not imported at ``import torch``.
"""

from __future__ import annotations

import collections
import enum
import sys
import threading
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple, Sequence

__all__ = [
    "PATCH_LOCK",
    "STATES",
    "ActivationSource",
    "EnvSwitch",
    "FixSpec",
    "FixState",
    "StrEnum",
    "env_prefix",
    "lazy_version",
]

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


if TYPE_CHECKING:  # the typed view of the records below

    class _EnvSwitchFields(NamedTuple):
        name: str
        default: bool
        help: str

    class _FixSpecFields(NamedTuple):
        id: str
        summary: str
        implementation: str
        distribution: str
        targets: Mapping[str, str]
        triggers: tuple[str, ...]
        order: int
        after: tuple[str, ...]
        upstream: tuple[str, ...]
        switches: tuple[EnvSwitch, ...]

else:  # the same records, built with collections.namedtuple (a third of typing.NamedTuple's cost)
    _EnvSwitchFields = collections.namedtuple("EnvSwitch", "name default help")
    _FixSpecFields = collections.namedtuple(
        "FixSpec", "id summary implementation distribution targets triggers order after upstream switches"
    )


class EnvSwitch(_EnvSwitchFields):
    """A boolean environment variable a fix reads itself (e.g. ``TORCHFIX_MY_FIX_STRICT``).

    Declared in the fix's :class:`FixSpec` (``switches=``) so that the core knows the variable: it
    is not reported as unknown, and a malformed value gets one :class:`TorchfixConfigWarning` and a
    doctor line, like the core's own variables. The fix reads it with :meth:`is_on`, which never
    raises (a malformed value means ``default``). ``name`` must start with ``TORCHFIX_<ID>_``
    (the owning fix's id upper-cased, ``-`` -> ``_``). An immutable record (a NamedTuple, not a
    dataclass, for the reason given under :class:`FixSpec`)."""

    __slots__ = ()

    def is_on(self, environ: Mapping[str, str] | None = None) -> bool:
        """The switch's value now (``os.environ`` by default): read on every call, so a test or a
        user may change it at run time."""
        import os

        from torchfix_core._env import parse_bool_word

        value = parse_bool_word((os.environ if environ is None else environ).get(self.name))
        return self.default if value is None else value


def env_prefix(fix_id: str) -> str:
    """``my-fix`` -> ``TORCHFIX_MY_FIX_`` (the prefix of every variable of that fix)."""
    return f"TORCHFIX_{fix_id.upper().replace('-', '_')}_"


class FixSpec(_FixSpecFields):
    """Metadata of one fix: an immutable, slotted record with value equality and a field-by-field
    repr, built with keyword arguments and validated when built.

    Args:
        id: the fix id; must equal the entry-point name in group ``torchfix.fixes``.
        summary: one line saying what the fix repairs.
        implementation: ``"module:attribute"`` of the :class:`torchfix_core.Fix` subclass; imported
            only when the fix is about to be applied.
        distribution: the fix's own distribution name (for the installed version).
        targets: top-level import name of each patched library -> ``packaging`` specifier of the
            versions where the fix was validated (e.g. ``{"torch": ">=2.12,<2.16"}``). Outside the
            range the fix is ``out-of-range`` unless forced; the probe decides inside it.
        triggers: modules that must all be imported before the fix is applied. The fix is applied
            the moment the last one finishes importing (at once if they already are). Pick the
            module that defines the patched object, so that activation never imports it.
        order: smaller applies first; ties are broken by id.
        after: ids of fixes that must be applied before this one when both apply.
        upstream: links to the upstream issue / pull request the fix backports.
        switches: the fix's own environment variables (besides ``TORCHFIX_<ID>_ENABLED``, which
            every fix has).

    A NamedTuple, not a dataclass, on purpose: every fix package builds its spec at ``import torch``,
    and a frozen slotted dataclass costs about 0.75 ms of code generation when its class is created
    (measured on torch 2.13 / Python 3.11, docs/performance.md), a third of activation's 2 ms budget;
    this record gives the same guarantees (immutable, no ``__dict__``, ``==`` by value, repr) for
    about 0.15 ms. Being a tuple it also unpacks and indexes; use the field names.
    """

    __slots__ = ()

    def __new__(
        cls,
        *,
        id: str,
        summary: str,
        implementation: str,
        distribution: str,
        targets: Mapping[str, str],
        triggers: Sequence[str],
        order: int = 100,
        after: Sequence[str] = (),
        upstream: Sequence[str] = (),
        switches: Sequence[EnvSwitch] = (),
    ) -> FixSpec:
        if ":" not in implementation:
            raise ValueError(f"FixSpec {id!r}: implementation must be 'module:attribute', got {implementation!r}")
        if not triggers:
            raise ValueError(f"FixSpec {id!r}: at least one trigger module is required")
        prefix = env_prefix(id)
        for switch in switches:
            if not isinstance(switch, EnvSwitch) or not switch.name.startswith(prefix):
                raise ValueError(f"FixSpec {id!r}: switches must be EnvSwitch records named {prefix}*")
        # normalized copies: a caller's list or dict cannot change the spec afterwards
        return super().__new__(
            cls,
            id,
            summary,
            implementation,
            distribution,
            dict(targets),
            tuple(triggers),
            int(order),
            tuple(after),
            tuple(upstream),
            tuple(switches),
        )


def lazy_version(package: str) -> Callable[[str], str]:
    """A module-level ``__getattr__`` for a fix package's ``__init__`` that reads ``__version__``
    from ``<package>.version`` on first use.

    A fix package is imported at ``import torch`` (its ``package`` module is the entry point), where
    every module costs; with ``__getattr__ = lazy_version(__name__)`` its ``__init__`` imports
    nothing else. Any other missing attribute raises :class:`AttributeError` as usual.
    """

    def __getattr__(name: str) -> str:
        if name == "__version__":
            import importlib

            return str(importlib.import_module(f"{package}.version").__version__)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
