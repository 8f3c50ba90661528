"""torchfix-placement-cache: DTensor compile-cache keys that cover the local shard layout.

Two things live here:

* the fix ``placement-cache`` (applied by torchfix-core when ``torch.distributed.tensor`` is
  imported): the AOTAutograd cache key of a DTensor input also covers its local shard's shape and
  stride, so a rank never loads an artifact compiled for another rank's shard, while ranks with
  identical shards keep sharing one entry (see :mod:`torchfix_placement_cache.patch`);
* :func:`input_signature`, a stable key for frameworks that keep their own artifact caches.

Importing this package does not import torch; :func:`input_signature` imports it when called.
"""

from __future__ import annotations

from typing import Any, Sequence

from torchfix_core.spec import lazy_version

__all__ = ["__version__", "input_signature"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)


def input_signature(example_inputs: Sequence[Any], *, include_rank: bool = False) -> str:
    """Stable hex key of ``example_inputs`` for an artifact cache; see
    :func:`torchfix_placement_cache.signature.input_signature` (imports torch lazily)."""
    from torchfix_placement_cache.signature import input_signature as _impl

    return _impl(example_inputs, include_rank=include_rank)
