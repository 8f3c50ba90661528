"""redis-cache-errors: a Redis server's error answer fails the compile that shares through it.

The bug (torch 2.8-2.15; no upstream issue or fix found)
    Inductor's Redis backend (``torch._inductor.remote_cache.RedisRemoteCacheBackend``) catches
    ``redis.exceptions.ConnectionError`` around its ``GET`` and ``SET`` (the server is not there:
    the remote cache turns itself off) and nothing else. A server that is there and answers a
    command with an error raises another ``redis.exceptions.RedisError``: ``OutOfMemoryError``
    (``command not allowed when used memory > 'maxmemory'``: ``maxmemory`` reached with the
    ``noeviction`` policy, Redis's default), ``ReadOnlyError`` (a read-only replica, e.g. after a
    failover, or the endpoint of a replica), ``NoPermissionError`` (an ACL user with read rights
    only: a cache that CI fills and jobs only read), ``TimeoutError`` (a ``socket_timeout`` in
    ``TORCHINDUCTOR_REDIS_URL``). ``RemoteCache.put`` / ``get`` record and re-raise it. The FX graph
    cache catches it around its remote write (a warning, ``fxgraph_cache_write_error``), but
    ``AOTAutogradCache.save`` calls ``remote_cache.put`` after its own ``try`` block, and so do the
    remote autotune cache's ``AutotuneCache.save`` and Dynamo's PGO code-state writer: with
    ``TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1`` the first compile of a function with a backward raises
    ``redis.exceptions.OutOfMemoryError`` (a Redis answer, easily taken for a device OOM) out of
    ``torch.compile``, and the training job dies, though the artifact was compiled and saved
    locally.

The fix (RUNTIME: what torch compiles and caches is unchanged)
    ``RedisRemoteCacheBackend._put`` and ``._get`` (class attributes; ``RemoteCacheBackend.put`` /
    ``get`` call them on the instance) are wrapped: a ``redis.exceptions.RedisError`` other than
    ``ConnectionError`` (which torch's own code keeps handling, turning the backend off) is caught;
    a refused write is skipped (the entry is not shared; the local caches have it) and a failed read
    is a miss, as the FX graph cache and torch's own lookups already treat them. The backend stays
    on, so writes succeed again once the server accepts them (memory freed, a primary back). Each
    error is counted (``remote-write-refused``, ``remote-read-failed``, with the error's class and
    message as the detail) and logged as a warning the first time its class is seen in the process.
    Any other exception (a bug, not the server's answer) propagates as before.

    Hazard: the error is no longer raised even where a user's own code relied on it to stop a job
    whose remote cache is misconfigured; the warning and the report's counts say it happened.
    ``torch._functorch.config.strict_autograd_cache`` (torch's test switch for cache failures) is
    honoured: with it set, the error is raised as before.

The probe
    Calls the live ``RedisRemoteCacheBackend._put`` and ``._get`` on an instance made without its
    ``__init__`` (no server, no connection) whose ``_redis`` answers ``SET`` / ``GET`` with
    ``redis.exceptions.ResponseError``: the error escaping is the bug; the call returning is
    upstream's fix (``not-needed``); ``redis`` not importable by torch (``remote_cache.redis`` is
    None) means torch cannot use a Redis cache in this process (``not-needed``). A backend class
    without ``_put`` / ``_get`` / the module's ``redis`` name refuses the fix.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

FIX_ID = "redis-cache-errors"
MODULE = "torch._inductor.remote_cache"
BACKEND = "RedisRemoteCacheBackend"
WRITE_REFUSED, READ_FAILED = "remote-write-refused", "remote-read-failed"

ACTED, log = tally_and_log(FIX_ID, WRITE_REFUSED, READ_FAILED)

PUT_PARAMETERS = ("self", "key", "data")
GET_PARAMETERS = ("self", "key")

#: error classes already logged in this process (one warning per class)
_WARNED: set[str] = set()


def _strict() -> bool:
    """Whether torch's ``strict_autograd_cache`` test switch asks for cache errors to be raised."""
    config = sys.modules.get("torch._functorch.config")
    return bool(getattr(config, "strict_autograd_cache", False))


def _server_error(redis: Any, error: BaseException) -> bool:
    """An error answer of a reachable server: a ``RedisError`` that is not a ``ConnectionError``."""
    exceptions = redis.exceptions
    return isinstance(error, exceptions.RedisError) and not isinstance(error, exceptions.ConnectionError)


def _record(event: str, what: str, key: str, error: BaseException) -> None:
    name = type(error).__name__
    ACTED.note(event, f"{name}: {error}")
    if name not in _WARNED:
        _WARNED.add(name)
        log.warning(
            "the Redis server refused a remote-cache %s (%s: %s, key %s); the compile goes on without "
            "sharing this entry (further %s errors are counted in torchfix's report, not logged)",
            what,
            name,
            error,
            key,
            name,
        )


def _make_put(redis: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _put(self: Any, key: str, data: Any) -> None:
            try:
                original(self, key, data)
            except Exception as error:
                if not _server_error(redis, error) or _strict():
                    raise
                _record(WRITE_REFUSED, "write", key, error)

        return _put

    return make


def _make_get(redis: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _get(self: Any, key: str) -> Any:
            try:
                return original(self, key)
            except Exception as error:
                if not _server_error(redis, error) or _strict():
                    raise
                _record(READ_FAILED, "read", key, error)
                return None

        return _get

    return make


class _Answering:
    """A stand-in ``redis.Redis`` whose ``set`` / ``get`` answer with ``error`` (no socket)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def set(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


def error_escapes(backend: type, redis: Any) -> dict[str, bool]:
    """``{"_put": escaped, "_get": escaped}``: whether a server's error answer
    (``redis.exceptions.ResponseError``) escapes the backend's live ``_put`` / ``_get``, called on an
    instance made without ``__init__`` whose ``_redis`` is :class:`_Answering`."""
    error = redis.exceptions.ResponseError("torchfix probe: an error answer of the server")
    escaped: dict[str, bool] = {}
    for name, args in (("_put", ("torchfix-probe", b"")), ("_get", ("torchfix-probe",))):
        instance: Any = object.__new__(backend)
        instance._redis = _Answering(error)
        method = getattr(backend, name)
        method = getattr(method, "__wrapped__", method)
        try:
            method(instance, *args)
        except type(error):
            escaped[name] = True
        else:
            escaped[name] = False
    return escaped


class RedisCacheErrorsFix(Fix):
    def probe(self) -> ProbeResult:
        module = imported_module(MODULE)
        backend = getattr(module, BACKEND, None)
        if not isinstance(backend, type):
            raise PatchRefused(f"{MODULE}.{BACKEND} not found")
        missing = [n for n in ("_put", "_get") if not callable(getattr(backend, n, None))]
        if missing or not hasattr(module, "redis"):
            raise PatchRefused(f"{MODULE}: {BACKEND} lacks {missing or ''} or the module has no 'redis' name")
        redis = module.redis
        if redis is None:
            return ProbeResult(False, "torch found no redis client: its Redis remote caches are off in this process")
        if not hasattr(redis, "exceptions") or not hasattr(redis.exceptions, "ResponseError"):
            raise PatchRefused(f"{MODULE}.redis has no exceptions.ResponseError")
        escaped = error_escapes(backend, redis)
        if not any(escaped.values()):
            return ProbeResult(False, f"{BACKEND} handles a Redis server's error answers itself (fixed upstream)")
        where = " and ".join(f"{n} (SET)" if n == "_put" else f"{n} (GET)" for n, e in escaped.items() if e)
        return ProbeResult(True, f"{BACKEND}.{where} lets a Redis server's error answer escape into the compile")

    def apply(self) -> None:
        module = imported_module(MODULE)
        backend = getattr(module, BACKEND)
        redis = module.redis
        if redis is None:
            raise PatchRefused(f"{MODULE}.redis is None: nothing to patch")
        self.patches.wrap(backend, "_put", _make_put(redis), signature=PUT_PARAMETERS)
        self.patches.wrap(backend, "_get", _make_get(redis), signature=GET_PARAMETERS)
