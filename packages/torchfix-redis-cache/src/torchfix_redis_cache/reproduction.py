"""redis-cache-errors' reproduction (``FixSpec.reproduction``: :func:`refused_write`), CPU, and the
server setups and compiled step the package's tests and demo use.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the tests and
the demo run; imported only when a reproduction runs (torch is imported inside the functions).

The case: a real ``redis-server`` (the Debian package's binary) on a free loopback port that
refuses every write the way a full cache does (``maxmemory`` of 1 byte, ``noeviction``: Redis's
``OOM command not allowed when used memory > 'maxmemory'``), torch's remote caches on
(``fx_graph_remote_cache``, ``enable_remote_autograd_cache``: what ``TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1``
and ``TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1`` turn on), a fresh local cache directory, and one
compiled training step (``relu(x @ w).sum()``, forward and backward). The bug: the step raises
``redis.exceptions.OutOfMemoryError`` from ``AOTAutogradCache.save``; the FX graph cache's own
write of the same server error is only a warning.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Iterator

from torchfix_core.reproduction import Outcome, RedisServer, cannot_run, not_observed, observed

#: redis-server settings per refusal: a full cache, a read-only replica (``replica-read-only`` of a
#: replica of an unreachable primary), and a healthy server (the ACL case sets a user up instead)
SETUPS: dict[str, list[str]] = {
    "oom": ["--maxmemory", "1", "--maxmemory-policy", "noeviction"],
    "readonly": ["--replicaof", "127.0.0.1", "1", "--replica-read-only", "yes"],
    "noperm": [],
    "healthy": [],
}
#: the ACL user of the ``noperm`` setup: may read every key, may not write
READER = ("reader", "torchfix-reader")
NEEDS_SERVER = "needs the redis-server binary on PATH (Debian package redis-server)"


def start_server(setup: str) -> RedisServer:
    """A started :class:`RedisServer` in ``setup`` (a key of :data:`SETUPS`); ``noperm`` adds the
    read-only ACL user :data:`READER`."""
    server = RedisServer(SETUPS[setup]).start()
    if setup == "noperm":
        user, password = READER
        server.client().execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "+@read", "+@connection")
    return server


def point_torch_at(server: RedisServer, setup: str) -> None:
    """Set the environment torch's Redis backend reads when it is created (host, port; the ACL user
    through ``TORCHINDUCTOR_REDIS_URL`` for ``noperm``) and a fresh ``TORCHINDUCTOR_CACHE_DIR``, so the
    local caches start empty."""
    os.environ.pop("TORCHINDUCTOR_REDIS_URL", None)
    os.environ["TORCHINDUCTOR_REDIS_HOST"] = "127.0.0.1"
    os.environ["TORCHINDUCTOR_REDIS_PORT"] = str(server.port)
    if setup == "noperm":
        user, password = READER
        os.environ["TORCHINDUCTOR_REDIS_URL"] = f"redis://{user}:{password}@127.0.0.1:{server.port}/0"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchfix-redis-cache-")


def remote_caches_on() -> Any:
    """A context manager: Inductor's FX graph cache and AOTAutograd's cache on, local and remote."""
    import contextlib

    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    @contextlib.contextmanager
    def on() -> Iterator[None]:
        with (
            inductor_config.patch(fx_graph_cache=True, fx_graph_remote_cache=True),
            functorch_config.patch(enable_autograd_cache=True, enable_remote_autograd_cache=True),
        ):
            yield

    return on()


def compiled_step(seed: int = 0) -> dict[str, Any]:
    """One compiled training step of ``relu(x @ w).sum()`` (8 x 8, fixed seed) against eager: ``ok``,
    ``error`` (``"<module>.<class>: <message>"``) and ``traceback`` where it raised, else
    ``max_abs_diff`` of the gradient of ``w``. The caller has set the caches up."""
    import traceback

    import torch

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w).sum()

    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 8, generator=generator)
    w = torch.randn(8, 8, generator=generator, requires_grad=True)
    step(x, w).backward()
    expected = w.grad.clone()  # type: ignore[union-attr]
    w.grad = None
    try:
        torch.compile(step, dynamic=False)(x, w).backward()
    except Exception as error:  # noqa: BLE001 - the case reports what the compile raised
        kind = type(error)
        return {
            "ok": False,
            "error": f"{kind.__module__}.{kind.__name__}: {error}",
            "traceback": traceback.format_exc(),
        }
    diff = (w.grad - expected).abs().max().item()  # type: ignore[operator]
    return {"ok": True, "max_abs_diff": diff}


def refused_write() -> Outcome:
    """The bug observed where a compiled step fails because the Redis server refused a remote-cache
    write (measure: the exception); not observed where the step runs and its gradient equals eager's
    while the server holds no entry (every write refused)."""
    if not RedisServer.available():
        return cannot_run(NEEDS_SERVER)
    server = start_server("oom")
    try:
        point_torch_at(server, "oom")
        with remote_caches_on():
            result = compiled_step()
        entries = len(server.keys())
    finally:
        server.stop()
    if not result["ok"]:
        return observed(f"{result['error']} (the compiled step failed: a remote-cache write the server refused)")
    return not_observed(
        f"the compiled step ran against a server refusing every write ({entries} entries stored); "
        f"gradient against eager: max abs diff {result['max_abs_diff']:.3g}"
    )
