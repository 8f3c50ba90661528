"""torchfix-aot-fallback: AOT compile where torch can, JIT where it cannot, never hiding real errors.

``torch.compile(fn, fullgraph=True).aot_compile(...)`` raises for models it cannot capture or
serialize (graph breaks, DTensor/SimpleFSDP code), and a loaded artifact raises on a guard miss.
With this fix applied those two cases return a JIT-compiled callable (one warning, recorded in
``torchfix-doctor``); OOM, AssertionError, user errors and required-cache misses propagate.
The public API lives in :mod:`torchfix_aot_fallback.api` (importing this package imports no torch).
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from ``version.py`` on first use: this package is imported at
    ``import torch`` (its ``package`` module is the entry point), where every module costs."""
    if name == "__version__":
        from torchfix_aot_fallback.version import __version__

        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
