"""The read-side records: :class:`FixStatus` (one row of :func:`torchfix_core.status`) and
:class:`Activation` (how activation happened). Imported on the first ``status()`` or
``activation()``, never at ``import torch``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from torchfix_core._states import ActivationSource, FixState


@dataclass(frozen=True, slots=True)
class FixStatus:
    """One row of :func:`torchfix_core.status`: a fix's state and the reason for it."""

    id: str
    distribution: str
    version: str | None
    state: FixState
    reason: str
    targets: Mapping[str, str]
    upstream: tuple[str, ...]
    summary: str

    def as_dict(self) -> dict[str, object]:
        """The row as plain JSON data (``state`` as its string value), as ``torchfix-doctor --json`` prints it."""
        return {
            "id": self.id,
            "distribution": self.distribution,
            "version": self.version,
            "state": self.state.value,
            "reason": self.reason,
            "targets": dict(self.targets),
            "upstream": list(self.upstream),
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class Activation:
    """The activation record: its source and a sentence saying what happened."""

    source: ActivationSource
    detail: str

    def as_dict(self) -> dict[str, str]:
        """The record as JSON data (``source`` as its string value), as doctor prints it."""
        return {"source": self.source.value, "detail": self.detail}
