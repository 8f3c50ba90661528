"""Scenarios of the redis-cache-errors tests (a test harness, not shipped): ``python _scenarios.py NAME
[ARGS]`` prints one JSON object last. Servers, environment and the compiled step are the shipped
reproduction's (``torchfix_redis_cache.reproduction``); every scenario starts its own real
``redis-server`` and a fresh local cache directory.

* ``refused SETUP``: a server that refuses writes (``oom``: maxmemory 1 byte, noeviction;
  ``readonly``: a read-only replica; ``noperm``: an ACL user that may only read), the remote caches on,
  one compiled training step: whether it ran (its gradient against eager) or its error and
  traceback, the entries the server holds.
* ``recovers``: a full server refuses the first step's writes; then its ``maxmemory`` is lifted and a
  second function is compiled: its entries are stored (the backend stayed on).
* ``shared``: a healthy server; the step compiled twice, the second time with an empty local cache
  directory and Dynamo reset: the AOTAutograd entry comes back from Redis (a remote hit).
* ``gone``: the server stopped before the compile (torch's own ``ConnectionError`` handling).
* ``other-error``: the backend's ``_put`` / ``_get`` called directly on a client that raises
  ``ValueError`` (not a server's answer): whether it propagates.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import torch
from torchfix_redis_cache.reproduction import compiled_step, point_torch_at, remote_caches_on, start_server


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of

    return report_of("redis-cache-errors")


def _counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {**{f"aot {k}": v for k, v in counters["aot_autograd"].items()}, **dict(counters["inductor"])}


def refused(setup: str) -> dict[str, Any]:
    server = start_server(setup)
    try:
        point_torch_at(server, setup)
        with remote_caches_on():
            out = compiled_step()
        out["entries"] = len(server.keys())
    finally:
        server.stop()
    out["counters"] = _counters()
    return out


def recovers() -> dict[str, Any]:
    server = start_server("oom")
    try:
        point_torch_at(server, "oom")
        with remote_caches_on():
            first = compiled_step(seed=0)
            entries_before = len(server.keys())
            server.client().config_set("maxmemory", "0")
            torch._dynamo.reset()
            second = compiled_step(seed=1)  # same graph: a local hit, nothing new to write
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchfix-redis-cache-")
            torch._dynamo.reset()
            third = compiled_step(seed=2)
        entries_after = len(server.keys())
    finally:
        server.stop()
    ok = first["ok"] and second["ok"] and third["ok"]
    return {"ok": ok, "steps": [first, second, third], "entries_before": entries_before, "entries_after": entries_after}


def shared() -> dict[str, Any]:
    server = start_server("healthy")
    try:
        point_torch_at(server, "healthy")
        with remote_caches_on():
            first = compiled_step()
            entries = len(server.keys())
            before = _counters()
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchfix-redis-cache-")
            torch._dynamo.reset()
            second = compiled_step()
            after = _counters()
    finally:
        server.stop()
    hits = after.get("aot autograd_cache_hit", 0) - before.get("aot autograd_cache_hit", 0)
    return {"ok": first["ok"] and second["ok"], "steps": [first, second], "entries": entries, "aot_hits": hits}


def gone() -> dict[str, Any]:
    server = start_server("healthy")
    point_torch_at(server, "healthy")
    server.stop()
    with remote_caches_on():
        out = compiled_step()
    out["counters"] = _counters()
    return out


def other_error() -> dict[str, Any]:
    import torch._inductor.remote_cache as remote_cache

    class Broken:
        def set(self, *args: Any) -> None:
            raise ValueError("not a server's answer")

        def get(self, *args: Any) -> None:
            raise ValueError("not a server's answer")

    backend = object.__new__(remote_cache.RedisRemoteCacheBackend)
    backend._redis = Broken()
    raised = {}
    for name, args in (("_put", ("k", b"v")), ("_get", ("k",))):
        try:
            getattr(backend, name)(*args)
            raised[name] = ""
        except ValueError as error:
            raised[name] = f"ValueError: {error}"
    return {"ok": True, "raised": raised}


def main(argv: list[str]) -> None:
    name, args = argv[0], argv[1:]
    scenarios = {"refused": refused, "recovers": recovers, "shared": shared, "gone": gone, "other-error": other_error}
    out = scenarios[name](*args)
    out["report"] = _report()
    out["torch"] = torch.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
