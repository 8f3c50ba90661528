"""torchfix-recompute-cache: recompute correctness.

The fix ``recompute-cache`` (applied by torchfix-core when ``torch._dynamo`` is imported) turns off
Dynamo's most-recently-used reordering of its cache entries the first time a non-reentrant
activation checkpoint runs its forward, so a recompute of compiled code picks the same compiled graph
as the original forward (pytorch/pytorch#166926). See :mod:`torchfix_recompute_cache.patch`.

The fix ``budget-rng`` (applied when ``torch._functorch.partitioners`` is imported) makes the min-cut
partitioner save the forward's random outputs that a memory budget < 1 would recompute in the
backward with fresh randomness (pytorch/pytorch#190758). See :mod:`torchfix_recompute_cache.budget_rng`.

Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
