"""Cheap, data-only description of a fix: what an entry point in ``torchfix.fixes`` loads.

A fix package's ``package.py`` builds one :class:`FixSpec` and nothing else. Loading it must not
import torch, the patched library, or the fix's implementation: this module imports only the
standard library so that discovery at ``import torch`` costs microseconds per fix.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator, Mapping, Sequence

#: Held while any torchfix patch or revert runs, and by the registry around state changes
#: (re-entrant). Public as :data:`torchfix_core.patching.PATCH_LOCK`; defined here, in the one
#: module that discovery loads anyway, so that activation at ``import torch`` does not have to
#: import the patching layer.
PATCH_LOCK = threading.RLock()

#: Every state a fix can be in, as shown by :func:`torchfix_core.status` and ``torchfix-doctor``.
APPLIED = "applied"
PENDING = "pending"
NOT_NEEDED = "not-needed"
OUT_OF_RANGE = "out-of-range"
DISABLED = "disabled"
FAILED = "failed"
NOT_INSTALLED = "not-installed"
STATES = (APPLIED, PENDING, NOT_NEEDED, OUT_OF_RANGE, DISABLED, FAILED, NOT_INSTALLED)


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
    """

    __slots__ = (
        "id",
        "summary",
        "implementation",
        "distribution",
        "targets",
        "triggers",
        "order",
        "after",
        "upstream",
    )

    def __init__(
        self,
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
    ) -> None:
        if ":" not in implementation:
            raise ValueError(f"FixSpec {id!r}: implementation must be 'module:attribute', got {implementation!r}")
        if not triggers:
            raise ValueError(f"FixSpec {id!r}: at least one trigger module is required")
        self.id = id
        self.summary = summary
        self.implementation = implementation
        self.distribution = distribution
        self.targets = dict(targets)
        self.triggers = tuple(triggers)
        self.order = int(order)
        self.after = tuple(after)
        self.upstream = tuple(upstream)

    def __repr__(self) -> str:
        return f"FixSpec(id={self.id!r}, targets={self.targets!r}, triggers={self.triggers!r})"


class ProbeResult:
    """What :meth:`torchfix_core.Fix.probe` found on the live objects.

    ``needed`` is True when the bug is present and the patch points have the expected shape;
    ``reason`` is the human explanation shown by doctor either way. Unpacks as ``(needed, reason)``.
    (A plain class rather than a NamedTuple: this module is imported at ``import torch``.)
    """

    __slots__ = ("needed", "reason")

    def __init__(self, needed: bool, reason: str) -> None:
        self.needed = bool(needed)
        self.reason = reason

    def __iter__(self) -> Iterator[object]:
        return iter((self.needed, self.reason))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProbeResult) and (self.needed, self.reason) == (other.needed, other.reason)

    def __repr__(self) -> str:
        return f"ProbeResult(needed={self.needed!r}, reason={self.reason!r})"


class FixStatus:
    """One row of :func:`torchfix_core.status`."""

    __slots__ = ("id", "distribution", "version", "state", "reason", "targets", "upstream", "summary")

    def __init__(
        self,
        id: str,
        distribution: str,
        version: str | None,
        state: str,
        reason: str,
        targets: Mapping[str, str],
        upstream: tuple[str, ...],
        summary: str,
    ) -> None:
        self.id = id
        self.distribution = distribution
        self.version = version
        self.state = state
        self.reason = reason
        self.targets = targets
        self.upstream = upstream
        self.summary = summary

    def __repr__(self) -> str:
        return f"FixStatus(id={self.id!r}, state={self.state!r}, reason={self.reason!r})"

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "distribution": self.distribution,
            "version": self.version,
            "state": self.state,
            "reason": self.reason,
            "targets": dict(self.targets),
            "upstream": list(self.upstream),
            "summary": self.summary,
        }


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
