"""torchfix-fsdp-recompute: FSDP2 modules recomputed by activation checkpointing behave as in forward.

Two fixes, applied by torchfix-core when ``torch.distributed.fsdp._fully_shard._fsdp_state`` is
imported, both at ``FSDPState._pre_forward`` (the forward pre-hook ``fully_shard`` registers):

* ``fsdp-recompute-cast`` (pytorch/pytorch#159359, upstream PR #182580, torch 2.13): the recompute
  of a ``fully_shard``-ed module gets the ``MixedPrecisionPolicy`` casts of its forward
  (``param_dtype`` on the inputs, ``output_dtype`` on the outputs);
* ``fsdp-recompute-unshard`` (pytorch/pytorch#153354, upstream PR #171779, torch 2.11): the recompute
  unshards parameters that an earlier backward already resharded (nested ``fully_shard``, two
  forwards before one backward).

See :mod:`torchfix_fsdp_recompute.patch`. Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
