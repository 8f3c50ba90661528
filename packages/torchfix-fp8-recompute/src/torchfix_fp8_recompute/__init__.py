"""torchfix-fp8-recompute: TransformerEngine FP8 activation recompute with an inner FP8 autocast.

TE 1.13-2.18 decide at checkpoint entry whether a checkpointed region is an FP8 recompute region;
a callable that opens its own ``te.autocast`` / ``fp8_autocast`` is then treated as non-FP8, its
delayed-scaling modules skip the scale/amax stash, and the recompute fails with
``KeyError: 'global_fp8_buffer_pos_fwd_recompute'`` (or reuses a stale stash). This fix backports
TE PR #3284 (TE 2.19.0). Importing this package imports neither torch nor TransformerEngine.
"""

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
