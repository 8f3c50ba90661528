"""torchfix-autotune: run Inductor's runtime autotuner outside selective-checkpoint replay modes.

Since torch 2.13, selective activation checkpointing (SAC) replays strictly: any aten op that the
forward did not record raises during recompute. When a Triton kernel is first launched during
recompute, ``CachingAutotuner`` allocates, clones and zeroes benchmark tensors through the
dispatcher and backward fails with ``aten.empty.memory_format encountered during backward but not
found in storage``. This fix runs ``CachingAutotuner.bench``, ``.autotune_to_one_config`` and
``.coordinate_descent_tuning`` with the dispatch modes that declare ``ignore_compile_internals()``
temporarily removed from the current thread's mode stack.

Importing this package does not import torch; the patch lives in :mod:`torchfix_autotune.patch`.
"""

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
