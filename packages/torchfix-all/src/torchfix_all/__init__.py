"""torchfix-all: installs torchfix-core and every torchfix fix, and carries the family's data: its
member list (:mod:`torchfix_all.family`) and its catalog of signatures (:mod:`torchfix_all.catalog`)."""

from torchfix_all.version import __version__

__all__ = ["__version__"]
