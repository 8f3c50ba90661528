"""torchfix-inductor-rand4x: Inductor's 4x random path (``rand4x``) off unless opted in, as torch 2.15 does.

One fix, ``inductor-rand4x-dropout`` (pytorch issue #198333), applied by torchfix-core when
``torch._inductor.codegen.triton`` is imported: on torch 2.13 and 2.14, 1-D CUDA Triton kernels draw
their randomness with ``triton_helpers.rand4x`` (four values per Philox call), which repeats dropout
masks in groups of four when the offsets stride, and makes a checkpointed region's recompute (a
2-D kernel, ``tl.rand``) apply another mask than its forward: silently wrong gradients. The fix
backports torch 2.15's choice (``config.use_rand4x``, default off, on with
``TORCHINDUCTOR_USE_RAND4X=1``) and keys the compile caches on it.

See :mod:`torchfix_inductor_rand4x.patch`. Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
