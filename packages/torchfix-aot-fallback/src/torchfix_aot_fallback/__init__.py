"""torchfix-aot-fallback: AOT compile where torch can, JIT where it cannot, never hiding real errors.

``torch.compile(fn, fullgraph=True).aot_compile(...)`` raises for models it cannot capture or
serialize (graph breaks, DTensor/SimpleFSDP code), and a loaded artifact raises on a guard miss.
With this fix applied those two cases return a JIT-compiled callable (one warning, recorded in
``torchfix-doctor``); OOM, AssertionError, user errors and required-cache misses propagate.
The public API lives in :mod:`torchfix_aot_fallback.api` (importing this package imports no torch).
"""

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
