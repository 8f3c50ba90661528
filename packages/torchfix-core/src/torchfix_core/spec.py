"""Cheap, data-only description of a fix: what an entry point in ``torchfix.fixes`` loads.

A fix package's ``package.py`` builds one :class:`FixSpec` (and the :class:`EnvSwitch` records it
declares) and nothing else. Loading it must not import torch, the patched library, or the fix's
implementation: this module imports only the standard library (modules torch has loaded already),
so that discovery at ``import torch`` costs microseconds per fix.

Also here, because activation needs them: :class:`FixState` (every state a fix can be in) and
:data:`PATCH_LOCK`. The records that only the implementation side and ``status()`` use
(:class:`~torchfix_core.fix.ProbeResult`, :class:`~torchfix_core.status.FixStatus`) live in the
modules that use them and are not imported at ``import torch``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple

from torchfix_core._enum import StrEnum

#: Held while any torchfix patch or revert runs, and by the registry around state changes
#: (re-entrant). Public as :data:`torchfix_core.patching.PATCH_LOCK`; defined here, in the one
#: module that discovery loads anyway, so that activation at ``import torch`` does not have to
#: import the patching layer.
PATCH_LOCK = threading.RLock()


class FixState(StrEnum):
    """Every state a fix can be in, as shown by :func:`torchfix_core.status` and ``torchfix-doctor``.

    A ``str`` enum: ``FixState.APPLIED == "applied"``, ``str()`` and ``--json`` give the bare value."""

    APPLIED = "applied"
    PENDING = "pending"
    NOT_NEEDED = "not-needed"
    OUT_OF_RANGE = "out-of-range"
    DISABLED = "disabled"
    FAILED = "failed"
    NOT_INSTALLED = "not-installed"


#: every state, in the order doctor explains them (``tuple(FixState)``)
STATES = tuple(FixState)


class EnvSwitch(NamedTuple):
    """A boolean environment variable a fix reads itself (e.g. ``TORCHFIX_MY_FIX_STRICT``).

    Declared in the fix's :class:`FixSpec` (``switches=``) so that the core knows the variable: it
    is not reported as unknown, and a malformed value gets one :class:`TorchfixConfigWarning` and a
    doctor line, like the core's own variables. The fix reads it with :meth:`is_on`, which never
    raises (a malformed value means ``default``). ``name`` must start with ``TORCHFIX_<ID>_``
    (the owning fix's id upper-cased, ``-`` -> ``_``). An immutable record (a NamedTuple, not a
    dataclass: it is built at ``import torch``, where a dataclass's code generation costs ~0.3 ms)."""

    name: str
    default: bool
    help: str

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


@dataclass(frozen=True, slots=True)
class FixSpec:
    """Metadata of one fix.

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
    """

    id: str
    summary: str
    implementation: str
    distribution: str
    targets: Mapping[str, str]
    triggers: tuple[str, ...]
    order: int = 100
    after: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    switches: tuple[EnvSwitch, ...] = field(default=())

    def __post_init__(self) -> None:
        if ":" not in self.implementation:
            raise ValueError(
                f"FixSpec {self.id!r}: implementation must be 'module:attribute', got {self.implementation!r}"
            )
        if not self.triggers:
            raise ValueError(f"FixSpec {self.id!r}: at least one trigger module is required")
        prefix = env_prefix(self.id)
        for switch in self.switches:
            if not isinstance(switch, EnvSwitch) or not switch.name.startswith(prefix):
                raise ValueError(f"FixSpec {self.id!r}: switches must be EnvSwitch records named {prefix}*")
        # normalized copies: a caller's list or dict cannot change the spec afterwards
        object.__setattr__(self, "targets", dict(self.targets))
        for name in ("triggers", "after", "upstream", "switches"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "order", int(self.order))


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
