"""torchfix-fp8-minmax: Inductor's Triton ``minimum``/``maximum`` in the ``tl.where`` form.

One fix, ``fp8-minmax-store`` (Triton issue triton-lang/triton#11111, caused by pytorch PR #186933),
applied by torchfix-core when ``torch._inductor.codegen.triton`` is imported: on torch 2.14 with
Triton 3.8, Inductor's ``tl.minimum/maximum(a, b, tl.PropagateNan.ALL)`` next to a transposed fp8
store makes Triton write wrong bytes (NaN/Inf in float8 training) on some launch configs. The fix
emits the numerically identical ``tl.where`` form instead (what torchao 0.18 does for its float8
users) and adds a term to the FX graph cache key, so kernels cached before it are not reused.

See :mod:`torchfix_fp8_minmax.patch`. Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
