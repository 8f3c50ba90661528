"""torchfix-mix-order: Inductor's mix-order reduction writes into outputs that are views.

One fix, ``mix-order-view-write`` (pytorch issue #193061, fixed upstream by PR #193103 in torch
2.15), applied by torchfix-core when ``torch._inductor.codegen.simd`` is imported: on torch 2.10-2.14,
a mix-order reduction whose output is a view into another buffer (the gradients of ``chunk()``-ed
slices of one shared parameter, e.g. an adaLN ``scale_shift_table``) rebinds the output's name in
the generated wrapper instead of writing into it, so that region of the gradient is never written.
The fix writes through the view with ``copy_``, as upstream does, and adds a term to the compile
caches' keys, so backwards cached before it are not reused.

See :mod:`torchfix_mix_order.patch`. Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
