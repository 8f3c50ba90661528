"""torchfix-redis-cache: errors of a reachable Redis server in Inductor's remote caches.

One fix, ``redis-cache-errors``, applied by torchfix-core when ``torch._inductor.remote_cache`` is
imported: a write the Redis server refuses (``OOM`` under ``maxmemory`` with ``noeviction``, a
read-only replica, an ACL user without write permission) or a read it answers with an error no
longer fails the compile that shares its artifacts through ``TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE``
or the remote autotune cache; the entry is not shared, as the FX graph cache already does. See
:mod:`torchfix_redis_cache.patch`. Importing this package imports nothing else (not torch).
"""

from __future__ import annotations

from torchfix_core.spec import lazy_version

__all__ = ["__version__"]


#: ``__version__`` is read from ``version.py`` on first use (nothing imported at ``import torch``).
__getattr__ = lazy_version(__name__)
