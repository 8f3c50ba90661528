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

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from ``version.py`` on first use: this package is imported at
    ``import torch`` (its ``package`` module is the entry point), where every module costs."""
    if name == "__version__":
        from torchfix_autotune.version import __version__

        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
