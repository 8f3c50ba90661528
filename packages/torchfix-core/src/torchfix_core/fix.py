"""Base class of a fix's implementation (the heavy half, imported only when the fix is applied)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from torchfix_core.patching import PatchSet


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What :meth:`Fix.probe` found on the live objects.

    ``needed`` is True when the bug is present and the patch points have the expected shape;
    ``reason`` is the human explanation shown by doctor either way. Unpacks as ``(needed, reason)``.
    """

    needed: bool
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "needed", bool(self.needed))

    def __iter__(self) -> Iterator[object]:
        return iter((self.needed, self.reason))


class Fix:
    """Implementation of one fix. Subclasses override :meth:`probe` and :meth:`apply`.

    The registry creates one instance per process and calls, in this order and under its lock:
    ``probe()`` (is the bug present on the live objects, and do the patch points have the expected
    shape?), then ``apply()`` only if the probe said so. ``apply()`` must make every change through
    ``self.patches``; if it raises, the registry reverts whatever it had already patched.
    ``revert()`` undoes everything; override it only to undo state kept outside ``self.patches``
    (and call ``super().revert()``).

    A probe must be side-effect free (or restore what it touched), must not depend on the version
    string, and must raise :class:`torchfix_core.PatchRefused` when the layout is unknown.
    """

    def __init__(self, fix_id: str) -> None:
        self.fix_id = fix_id
        self.patches = PatchSet(fix_id)

    def probe(self) -> ProbeResult:
        raise NotImplementedError

    def apply(self) -> None:
        raise NotImplementedError

    def runtime_note(self) -> str:
        """Extra facts gathered while the fix ran (e.g. "2 fallbacks: ..."), appended to the reason
        shown by ``status()`` and doctor. Must be cheap and must not raise."""
        return ""

    def cache_key_detail(self) -> str:
        """For a fix of effect ``compiled``: what, besides the fix's id and version, the code it
        makes torch compile depends on (e.g. a third-party override already in place), as a short
        string; it enters the FX graph and AOTAutograd cache keys (:mod:`torchfix_core._cache_key`)
        and is read once per key computed, so it must be cheap, deterministic across processes and
        must not raise. Default: nothing beyond id and version."""
        return ""

    def revert(self) -> list[str]:
        """Undo every patch; returns the problems met (see :meth:`PatchSet.revert`)."""
        return self.patches.revert()
