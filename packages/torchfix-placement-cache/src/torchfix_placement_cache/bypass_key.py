"""The fix ``aot-bypass-key``: AOTAutograd's fallback cache key is a fresh ``uuid4`` for every graph.

The bug
    ``autograd_cache_key`` (``torch/_functorch/_aot_autograd/autograd_cache.py``) cannot key some
    graphs (a node outside its allowlist, e.g. an ``allow_in_graph`` function or Dynamo's
    ``get_external_object_by_index`` for a process group or stream). In AOT precompile mode it then
    falls back to a nonce, ``return str(random.random()), []``: torch 2.10 line 514 (under
    ``torch._dynamo.config.enable_aot_compile``), 2.11 line 648, 2.12 line 783, 2.13 line 896, 2.14.1
    line 965 (under ``torch._functorch.config.bypass_autograd_cache_key``, which
    ``aot_compile_fullgraph`` and ``aot_compile_joint_with_descriptors(serializable=True)`` set). The
    entry is then looked up and saved under that "nonce" in the local AOTAutograd cache. But
    ``random.random()`` is the application's RNG, so it is not a nonce:

    * Dynamo saves and restores Python's random state around every frame it compiles, so every graph
      of one capture (graph breaks) gets the same key (pytorch/pytorch#194451); the second graph
      loads the first one's artifact;
    * processes seeded alike (``random.seed(0)`` on every rank) draw the same key and load each
      other's artifact from a shared ``TORCHINDUCTOR_CACHE_DIR`` (the default one is shared by all
      processes of a user on a host), compiled for another graph or another device
      (pytorch/pytorch#191323, #191427); so does one process that reseeds before each AOT compile.

    The loaded artifact belongs to another graph: wrong results without an error (measured on CPU:
    ``g(x) = opaque(x) - 100`` AOT-compiled after ``f(x) = opaque(x) + 1`` returns ``f``'s values).

The patch (mirrors upstream's ``return uuid.uuid4().hex, []``, torch 2.15)
    The fallback reads exactly one object: the global name ``random`` of ``autograd_cache.py``, which
    no other code of that module reads (the probe checks it). :class:`UuidNonceSource` replaces that
    module attribute; its ``random()`` returns ``uuid.uuid4().hex``, so the fallback key becomes
    ``str(uuid4().hex)``: upstream's key, unique per call, independent of the application's RNG state
    (which the fallback no longer consumes, as upstream). The regular key path is not touched (no
    per-call cost), and because the function body looks the global up at call time, every binding
    of ``autograd_cache_key`` (``torch._functorch.aot_autograd``'s re-export, ``compile_fx``) is
    covered. Other attributes are forwarded to the real ``random`` module.

Probe (live objects, no version check)
    Where ``autograd_cache_key`` reads neither a fallback switch nor ``random`` (torch 2.8/2.9), it is
    called once on an unkeyable graph: it raises ``BypassAOTAutogradCache`` (the graph is not cached,
    no key is shared): ``not-needed``. Otherwise ``autograd_cache_key`` is called twice on an unkeyable graph (it calls a plain Python function) from the same Python
    random state with the fallback switch on (the switch the function itself reads, found in its
    code), the state restored afterwards. Equal keys: the bug (needed). Different keys: the key is
    already unique (torch 2.15: ``not-needed``). Equal keys but a layout the patch was not written for
    (the fallback no longer reads a module global ``random``, or another function of the module
    reads it) -> ``PatchRefused``.

Hazards
    Artifacts saved before the fix under a ``random`` nonce stay in the cache directory; the fix's
    keys (uuid4 hex) never collide with them. ``random.random()`` is no longer consumed by the
    fallback, so a seeded application's later ``random`` draws differ from an unpatched run (as with
    torch 2.15). Code that reads ``autograd_cache.random`` gets this object (its other attributes
    are the real module's).

Upstream: pytorch/pytorch#194451 (unique per call), #191427 / #191323 (uuid4, seeded ranks).
"""

from __future__ import annotations

import contextlib
import logging
import random as _random
import sys
import types
import uuid
from typing import Any, Callable, Iterator

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module, nested_code
from torchfix_core.tallies import tally_and_log

#: ``key-changed``: the fallback drew a uuid4 key instead of ``str(random.random())`` (once per
#: unkeyable graph compiled under AOT precompile; such a key never hits a cache entry)
ACTED, log = tally_and_log("aot-bypass-key", "key-changed")
COUNTS = ACTED.counts

MODULE = "torch._functorch._aot_autograd.autograd_cache"
FUNCTION = "autograd_cache_key"
GLOBAL = "random"
#: config switches the fallback reads: ``torch._functorch.config`` (2.11+) / ``torch._dynamo.config`` (2.10)
SWITCHES = (("torch._functorch.config", "bypass_autograd_cache_key"), ("torch._dynamo.config", "enable_aot_compile"))


class UuidNonceSource:
    """Stands in for the ``random`` module as seen by ``autograd_cache.py``.

    ``random()`` returns a fresh ``uuid.uuid4().hex`` (32 hex characters; ``str()`` of it is itself),
    so ``str(random.random())`` in the fallback yields upstream's key. Every other attribute is the
    real ``random`` module's. ``issued`` counts the fallback keys handed out (for ``status()``).
    """

    __slots__ = ("issued",)

    def __init__(self) -> None:
        self.issued = 0

    def random(self) -> str:
        self.issued += 1
        COUNTS["key-changed"] += 1
        return uuid.uuid4().hex

    def __getattr__(self, name: str) -> Any:
        return getattr(_random, name)

    def __repr__(self) -> str:
        return f"<torchfix aot-bypass-key: uuid4 nonce source standing in for {MODULE}.random>"


def _module() -> types.ModuleType:
    return imported_module(MODULE)


def _functions_of(module: types.ModuleType) -> Iterator[tuple[str, types.FunctionType]]:
    """Functions and methods defined in ``module`` (top level and one class level deep)."""
    for name, value in vars(module).items():
        if isinstance(value, types.FunctionType) and value.__globals__ is vars(module):
            yield name, value
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in vars(value).items():
                if isinstance(member, property):
                    member = member.fget
                func = getattr(member, "__func__", member)
                if isinstance(func, types.FunctionType) and func.__globals__ is vars(module):
                    yield f"{name}.{attr}", func


def _reads_global(func: types.FunctionType, name: str) -> bool:
    return any(name in code.co_names for code in nested_code(func.__code__))


def _switch_of(func: types.FunctionType) -> tuple[str, str]:
    """The config switch that turns the fallback on, as read by the live function."""
    names = {n for code in nested_code(func.__code__) for n in code.co_names}
    for module_name, flag in SWITCHES:
        config = sys.modules.get(module_name)
        if flag in names and config is not None and hasattr(config, flag):
            return module_name, flag
    raise PatchRefused(f"{MODULE}.{FUNCTION} reads none of the fallback switches {SWITCHES}: unknown layout")


def _bypass_without_fallback(module: types.ModuleType, func: types.FunctionType) -> str | None:
    """Where ``func`` reads neither a fallback switch nor ``random`` (torch 2.8/2.9, before AOT
    precompile's nonce), the name of the exception it raises on :func:`unkeyable_graph`: the graph
    is not cached at all. None where the function has a fallback (or reads either name). Raises
    :class:`PatchRefused` if such a function returns a key for the unkeyable graph (unknown layout)."""
    names = {n for code in nested_code(func.__code__) for n in code.co_names}
    if GLOBAL in names or any(flag in names for _, flag in SWITCHES):
        return None
    bypass = getattr(module, "BypassAOTAutogradCache", None)
    if not (isinstance(bypass, type) and issubclass(bypass, Exception)):
        raise PatchRefused(f"{MODULE} has no fallback key and no BypassAOTAutogradCache: unknown layout")
    try:
        with _quiet(getattr(module, "log", logging.getLogger(MODULE))):
            func(unkeyable_graph(), [], None, None)
    except bypass:
        return bypass.__name__
    except Exception as exc:  # noqa: BLE001 - neither a key nor a bypass: not the layout we know
        raise PatchRefused(f"{MODULE}.{FUNCTION} on an unkeyable graph raised {exc!r}: unknown layout") from None
    raise PatchRefused(f"{MODULE}.{FUNCTION} keyed an unkeyable graph without any fallback: unknown layout")


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """Silence torch's "falling back to nonce" log line for the probe's own two calls."""
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before


def _not_allowlisted(x: Any) -> Any:
    """A plain Python function: not on AOTAutograd's allowlist, so a graph calling it has no key."""
    return x


def unkeyable_graph() -> Any:
    """``GraphModule`` ``x -> _not_allowlisted(x)``: ``check_cacheable`` refuses it on every release."""
    import torch

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(_not_allowlisted, (x,)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def fallback_keys(func: Callable[..., Any] | None = None) -> tuple[str, str]:
    """Two fallback keys of ``autograd_cache_key`` drawn from the same Python random state.

    The function is called on :func:`unkeyable_graph` (its key cannot be computed, so the fallback
    runs) with its fallback switch on; Python's random state is set to one saved state before each
    call and restored afterwards. Raises :class:`PatchRefused` when the fallback does not run.
    """
    module = _module()
    func = getattr(module, FUNCTION, None) if func is None else func
    if not isinstance(func, types.FunctionType):
        raise PatchRefused(f"{MODULE}.{FUNCTION} is a {type(func).__name__}, expected a function")
    config_name, flag = _switch_of(func)
    config = sys.modules[config_name]
    gm = unkeyable_graph()
    state = _random.getstate()
    keys: list[str] = []
    try:
        with config.patch({flag: True}), _quiet(getattr(module, "log", logging.getLogger(MODULE))):  # type: ignore[attr-defined]
            for _ in range(2):
                _random.setstate(state)
                key, lines = func(gm, [], None, None)
                keys.append(key)
    except PatchRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - the fallback did not run: not the layout we know
        raise PatchRefused(
            f"{MODULE}.{FUNCTION} on an unkeyable graph did not fall back to a nonce key: {exc!r}"
        ) from None
    finally:
        _random.setstate(state)
    if lines != [] or not all(isinstance(k, str) and k for k in keys):
        raise PatchRefused(f"{MODULE}.{FUNCTION} fallback returned {keys!r}, {lines!r}: unknown layout")
    return keys[0], keys[1]


class AotBypassKeyFix(Fix):
    """Replaces ``autograd_cache.random`` by :class:`UuidNonceSource` (see the module doc)."""

    def probe(self) -> ProbeResult:
        module = _module()
        func = getattr(module, FUNCTION, None)
        if not isinstance(func, types.FunctionType):
            raise PatchRefused(f"{MODULE}.{FUNCTION} is a {type(func).__name__}, expected a function")
        bypass = _bypass_without_fallback(module, func)
        if bypass is not None:
            return ProbeResult(
                False,
                f"{FUNCTION} has no fallback key: an unkeyable graph bypasses the cache ({bypass}), so no two "
                "graphs share an artifact",
            )
        first, second = fallback_keys(func)
        if first != second:
            return ProbeResult(
                False,
                f"{FUNCTION}'s fallback key does not depend on Python's random state "
                f"({first!r} then {second!r} from one state): already unique per call",
            )
        self._check_layout(module, func)
        return ProbeResult(
            True,
            f"{FUNCTION}'s fallback key is str(random.random()) ({first!r} twice from one random state): "
            "graphs of one Dynamo capture, and processes seeded alike, share AOT-precompiled artifacts",
        )

    @staticmethod
    def _check_layout(module: types.ModuleType, func: types.FunctionType) -> None:
        if getattr(module, GLOBAL, None) is not _random:
            raise PatchRefused(f"{MODULE}.{GLOBAL} is {getattr(module, GLOBAL, None)!r}, not the random module")
        if func.__globals__ is not vars(module) or not _reads_global(func, GLOBAL):
            raise PatchRefused(f"{MODULE}.{FUNCTION} does not read the module global {GLOBAL!r}: unknown layout")
        others = [name for name, f in _functions_of(module) if f is not func and _reads_global(f, GLOBAL)]
        if others:
            raise PatchRefused(f"{MODULE}.{GLOBAL} is also read by {others}: replacing it would reach them too")

    def apply(self) -> None:
        module = _module()
        func = getattr(module, FUNCTION)
        self._check_layout(module, func)
        self._source = self.patches.replace(
            module,
            GLOBAL,
            UuidNonceSource(),
            check=lambda raw: None if raw is _random else f"is {raw!r}, not the random module",
        )
        log.debug("aot-bypass-key: %s.%s now draws uuid4 fallback keys", MODULE, FUNCTION)

    def runtime_note(self) -> str:
        source = getattr(self, "_source", None)
        issued = source.issued if source is not None else 0
        return f"{issued} uuid4 fallback key(s) issued" if issued else ""
