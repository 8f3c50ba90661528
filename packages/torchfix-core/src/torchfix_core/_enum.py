"""``StrEnum``: the base of torchfix's state enums (``enum.StrEnum`` needs Python 3.11)."""

from __future__ import annotations

import enum


class StrEnum(str, enum.Enum):
    """A ``str`` enum whose members compare equal to, print as and serialize (JSON) as their value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)
