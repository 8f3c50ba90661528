"""torchfix-dcp: distributed checkpoint (DCP) state-dict keys of ``checkpoint_wrapper(torch.compile(block))``.

One fix, ``dcp-fqn-orig-mod`` (pytorch/torchtitan#2622), applied by torchfix-core when
``torch.distributed.checkpoint.state_dict`` is imported: ``get_model_state_dict`` /
``get_state_dict`` / ``get_optimizer_state_dict`` drop the compiler's ``_orig_mod`` prefix of a
compiled block wrapped by activation checkpointing afterwards, as they already do for every other
compiled module, and checkpoints written with the old keys still load. See :mod:`torchfix_dcp.patch`.
Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
