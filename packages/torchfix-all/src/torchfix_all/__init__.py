"""torchfix-all: installs torchfix-core and every torchfix fix. It holds no code of its own."""

from torchfix_all.version import __version__

__all__ = ["__version__"]
