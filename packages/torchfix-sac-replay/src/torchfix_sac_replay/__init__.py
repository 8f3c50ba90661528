"""torchfix-sac-replay: activation-checkpoint recompute sees the forward's compiler config.

Since torch 2.12 the Dynamo / Inductor / ``torch.compiler`` config overrides live in ContextVars
(pytorch#186537). CUDA backward runs on an autograd worker thread, so the recompute of a
non-reentrant checkpoint ran under default settings (``recompile_limit`` 8, no
``capture_scalar_outputs``, empty ``dynamic_sources``) and, on a Dynamo cache miss, recompiled
differently or fell back to eager; selective checkpointing's strict replay (2.13+) then fails with
``... encountered during backward but not found in storage``.

This fix runs each recompute in a copy of the ``contextvars`` context captured when the checkpoint
frame was created in the forward, and makes the "not found in storage" error say what differed.
Importing this package imports nothing from torch; the patch is applied by torchfix-core once
``torch._dynamo`` is imported. Disable with ``TORCHFIX_DISABLE=sac-replay``.
"""

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
