"""A fix's declared reproduction (``FixSpec.reproduction``): its result, and how one runs.

A reproduction function returns one :class:`Outcome`, built with :func:`observed`,
:func:`not_observed` or :func:`cannot_run`. A silent bug reports its measure (the max gradient
error, the bytes differing, the stale hooks counted), never just a boolean; a loud one, the
exception it raised. An exception the function lets out means the reproduction itself broke.

``python -m torchfix_core.reproduction ID`` runs fix ``ID``'s reproduction in this interpreter, as
the environment switched torchfix (the caller sets ``TORCHFIX_DISABLE=all`` and
``TORCHFIX_<ID>_ENABLED``), and prints one JSON line: the outcome, the fix's state here (its
triggers imported after the run where the case never imported them here), the
seconds taken, or the error that broke it (exit status 2). ``torchfix-doctor verify``, the testing
kit (``torchfix_core.testing.reproduce``), ``nox -s demo`` and the combination suite all run it so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Iterator, Sequence

__all__ = [
    "Outcome",
    "RedisServer",
    "cannot_run",
    "compile_caches_off",
    "free_port",
    "load",
    "main",
    "not_observed",
    "observed",
    "triton_version",
]

#: the values of :attr:`Outcome.result`
OBSERVED, NOT_OBSERVED, CANNOT_RUN = "observed", "not-observed", "cannot-run"


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What one run of a reproduction showed.

    ``result`` is ``"observed"`` (the bug showed: ``measure`` says how much or which error),
    ``"not-observed"`` (the case ran as it should: ``measure`` says what was compared), or
    ``"cannot-run"`` (this machine lacks what the case needs: ``detail`` says what).
    """

    result: str
    measure: str = ""
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"result": self.result, "measure": self.measure, "detail": self.detail}


def observed(measure: str, detail: str = "") -> Outcome:
    """The bug showed; ``measure``: the exception (type and first line) or the size of the harm."""
    return Outcome(OBSERVED, measure, detail)


def not_observed(measure: str, detail: str = "") -> Outcome:
    """The case ran correctly; ``measure``: what was compared and how close it came."""
    return Outcome(NOT_OBSERVED, measure, detail)


def cannot_run(why: str) -> Outcome:
    """This machine cannot run the case (no GPU, a library missing, too few devices): ``why``."""
    return Outcome(CANNOT_RUN, "", why)


def triton_version() -> str | None:
    """The installed Triton's version, None without Triton."""
    try:
        import triton
    except ImportError:
        return None
    return str(triton.__version__)


@contextlib.contextmanager
def compile_caches_off() -> Iterator[None]:
    """Inside: Inductor's FX graph and autotuning caches and AOTAutograd's cache off, local and remote
    (each setting this torch has), so a reproduction compiles everything itself and never reads a
    cached artifact."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    # the switches (bool, or None for "default") named fx_graph*_cache and autotun*_cache, local and remote
    caches = {
        k: False
        for k, v in inductor_config.get_config_copy().items()
        if k.startswith(("fx_graph", "autotun")) and k.endswith("_cache") and (v is None or isinstance(v, bool))
    }
    aot = {k: False for k in ("enable_autograd_cache", "enable_remote_autograd_cache") if hasattr(functorch_config, k)}
    with inductor_config.patch(caches), functorch_config.patch(aot):
        yield


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (for a server or a rendezvous the caller starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A throw-away ``redis-server`` (the Debian package's binary) on ``127.0.0.1:<free port>``, with
    persistence off, in a temporary directory removed at :meth:`stop`; ``extra`` are further command
    line settings (``["--maxmemory", "1mb"]``). A context manager: ``with RedisServer() as server``.

    Needs the ``redis-server`` binary on ``PATH`` (:meth:`available`) and the ``redis`` client
    (registry). :meth:`start` waits for the server to answer ``PING`` and raises ``RuntimeError`` when it
    exits or does not answer within ``timeout`` seconds.
    """

    def __init__(self, extra: Sequence[str] = (), binary: str = "redis-server") -> None:
        self.binary = binary
        self.extra = list(extra)
        self.port = free_port()
        self.directory = tempfile.mkdtemp(prefix="torchfix-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available(binary: str = "redis-server") -> bool:
        """Whether the server binary is on ``PATH``."""
        return shutil.which(binary) is not None

    def client(self, **kwargs: Any) -> Any:
        """A ``redis.Redis`` client of this server (``kwargs``: username, password, ...)."""
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def start(self, timeout: float = 20.0) -> RedisServer:
        import redis

        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", self.directory, "--daemonize", "no", "--protected-mode", "yes", *self.extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.ping():
                    return self
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)

    def keys(self) -> list[str]:
        """Every key the server holds (torch's are ``pt2:<cache id>::<key>:c1``)."""
        return sorted(k.decode() for k in self.client().keys("*"))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def load(fix_id: str) -> Any:
    """The installed fix ``fix_id``'s declared reproduction (a :class:`torchfix_core.spec.Reproduction`).

    Raises ``LookupError`` naming the installed ids when ``fix_id`` is not installed, and when its
    spec declares no reproduction.
    """
    from torchfix_core import _registry

    entries = _registry.entries()
    if fix_id not in entries:
        raise LookupError(f"no installed fix {fix_id!r}; installed: {', '.join(sorted(entries)) or 'none'}")
    declared = entries[fix_id].spec.reproduction
    if declared is None:
        raise LookupError(f"fix {fix_id!r} declares no reproduction")
    return declared


def _function(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _settled_state(fix_id: str) -> str:
    """The fix's state in this interpreter once the reproduction has run. A reproduction whose case
    runs in interpreters of its own (spawned ranks, a second process) may never import the fix's
    triggers here, which leaves it ``pending``: its triggers are imported then, after the run, so
    that the state says what the fix did (or would do) here, as doctor resolves it."""
    import importlib

    from torchfix_core import _registry, status

    def state() -> str:
        return next((str(r.state) for r in status() if r.id == fix_id), "not-installed")

    if state() == "pending":
        for trigger in _registry.entries()[fix_id].spec.triggers:
            try:
                importlib.import_module(trigger)
            except ImportError:
                break  # a trigger this torch lacks: the fix stays pending, as the run left it
    return state()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1:
        print("usage: python -m torchfix_core.reproduction FIX_ID", file=sys.stderr)
        return 2
    fix_id = argv[0]
    record: dict[str, Any] = {"id": fix_id}
    started = time.perf_counter()
    try:
        # run as ``python -m``, this module is ``__main__``: the reproduction returns the class of
        # the imported module, so check against that one
        from torchfix_core.reproduction import Outcome as Declared
        from torchfix_core.reproduction import load as load_declared

        declared = load_declared(fix_id)
        outcome = _function(declared.run)()
        if not isinstance(outcome, Declared):
            raise TypeError(f"{declared.run} returned {type(outcome).__name__}, not an Outcome")
        record["outcome"] = outcome.as_dict()
    except Exception as exc:  # noqa: BLE001 - reported as "the reproduction broke", never a traceback to the user
        record["broke"] = f"{type(exc).__name__}: {exc}"[:2000]
        record["traceback"] = traceback.format_exc()[-4000:]
    record["seconds"] = round(time.perf_counter() - started, 2)
    try:
        record["state"] = _settled_state(fix_id)
    except Exception as exc:  # noqa: BLE001
        record["state"] = f"unknown ({type(exc).__name__}: {exc})"
    print(json.dumps(record), flush=True)
    return 2 if "broke" in record else 0


if __name__ == "__main__":
    sys.exit(main())
