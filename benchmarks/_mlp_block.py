"""The transformer MLP block that the sac-replay benchmarks train: LayerNorm, Linear d->4d, GELU,
Linear 4d->d, residual. Imported by a benchmark's child process (after its environment is set), from
this directory (``python benchmarks/NAME.py`` puts it first on ``sys.path``)."""

from __future__ import annotations

import torch


class MLPBlock(torch.nn.Module):
    """``x + mlp(x)``; a subclass that changes the residual calls :meth:`mlp`."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """The block without its residual."""
        return self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(x)
