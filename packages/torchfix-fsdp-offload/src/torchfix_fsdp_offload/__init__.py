"""torchfix-fsdp-offload: FSDP2 CPU offload hands post-accumulate-grad hooks a landed gradient.

One fix, ``fsdp-offload-hook`` (upstream PR pytorch/pytorch#180666, torch 2.13), applied by
torchfix-core when ``torch.distributed.fsdp._fully_shard._fsdp_param_group`` is imported: with
``CPUOffloadPolicy(pin_memory=True)`` the gradient copy to pinned CPU memory of a parameter that
has post-accumulate-grad hooks (optimizer in backward) is made blocking, as upstream does, so the
hook reads the finished gradient instead of a buffer the copy has not yet filled.

See :mod:`torchfix_fsdp_offload.patch`. Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
