"""The sac-storage-key fix: selective checkpointing keeps one saved-output queue per compiled region.

The bug (pytorch/pytorch#175258; fixed upstream by PR #177198 / #183080, released in torch 2.13.0)
    With ``torch._inductor.config.wrap_inductor_compiled_regions`` on, every Inductor-compiled region
    runs as the ``inductor_compiled_code`` higher-order op under a dispatch mode, so selective
    activation checkpointing (SAC) sees it like any op. SAC's two modes in
    ``torch/utils/checkpoint.py`` (``_CachingTorchDispatchMode`` records in the forward,
    ``_CachedTorchDispatchMode`` replays in the recompute) keep saved outputs in one FIFO list per
    ``func``: ``self.storage[func].append(...)`` / ``self.storage.get(func)`` then ``pop(0)``. All
    compiled regions are the same ``func`` (the op), so they share one queue. When the recompute
    skips a region the forward ran (the classic case: a block mask built by a compiled
    ``create_block_mask`` and cached in a Python dict, so the recompute finds it cached), the next
    region pops the skipped region's outputs. Seen as ``RuntimeError: Only Tensors of floating point
    and complex dtype can require gradients`` (``DTensor.__tensor_unflatten__`` fed the int mask,
    torch 2.10/2.11), ``IndexError: tuple index out of range`` (torch 2.12), or silently wrong
    gradients when the shapes and dtypes happen to fit.

What upstream did
    torch 2.13 added ``_sac_storage_key(func, args)`` (``torch/utils/checkpoint.py:1338``, used at
    ``:1388`` and ``:1441``): ``(func, _resolve_inductor_callable(args[0]).idx)`` for
    ``inductor_compiled_code``, ``func`` for every other op, so each compiled region has its own
    queue. (2.13 also made the storage indexed and the replay strict, PR #176455; not backported.)

The patch (torch 2.10, 2.11, 2.12)
    :func:`make_keyed_dispatch` wraps ``__torch_dispatch__`` of both SAC modes (``checkpoint.py``
    2.12 ``:1333`` / ``:1389``, 2.11 ``:1335`` / ``:1376``, 2.10 ``:1331`` / ``:1372``; the storage
    lines are 2.12 ``:1375`` / ``:1402``, 2.11 ``:1362`` / ``:1389``, 2.10 ``:1358`` / ``:1385``).
    For an ``inductor_compiled_code`` call it runs torch's own method with ``self.storage`` seen through :class:`_RegionStorage`, which maps that one op to the key
    upstream uses, ``(inductor_compiled_code, region)``, and passes every other key through; for
    any other op it calls torch's method directly. Region = ``InductorCompiledCallable.idx``
    resolved as upstream does (2.12: ``_resolve_inductor_callable`` accepts the callable or its
    side-table int), or the compiled callable object itself (2.10/2.11, whose HOP is called with the
    bare callable; held as a dict key, so its identity cannot be reused while the storage lives).
    Cost: one identity test per op; for a compiled region also one small object and two attribute
    stores. torch 2.11+ installs ``__torch_dispatch__`` of every mode behind
    ``torch._disable_dynamo`` (``TorchDispatchMode.__init_subclass__``); there the wrapper goes
    behind the same layer and calls torch's undecorated method, so the number of Dynamo ``disable``
    layers per op is unchanged. On 2.10 (no such layer) the wrapper is installed plain, like torch's
    own method.

Probe (live objects, never the version)
    * ``torch.utils.checkpoint._sac_storage_key`` exists: upstream's fix is in: not needed.
    * ``torch._higher_order_ops.wrap`` has no ``inductor_compiled_code`` (torch 2.8/2.9): compiled
      code never reaches SAC as one op, so there is no region queue to mix up: not needed.
    * The two modes, their ``__torch_dispatch__(self, func, types, args, kwargs)`` and the storage
      accessors the view supports (``[]`` in the caching mode, ``.get`` in the cached one: read from
      the code's names), and the HOP in one of the two validated call layouts; anything else is
      refused.
    * Behaviour: two regions recorded, only the second replayed; the bug is present when the
      replay returns the first region's output (:func:`replay_returns_other_region`). After
      patching the same check must pass, else the patch is rolled back.

Hazards
    * Storage recorded *before* the patch and replayed after it (the fix applied between a
      checkpoint's forward and its backward) is keyed the old way: that one recompute reports
      ``... not found in storage``. The fix is applied when ``torch._dynamo`` is imported, which any
      compiled region needs first, so a region saved without the patch cannot exist in practice.
    * While torch's method runs for a compiled region, ``mode.storage`` is the view; code reading
      ``mode.storage`` from another thread in that instant would see it. SAC's modes are per
      checkpoint call and run on one thread at a time.
    * On 2.12 the probe creates two ``InductorCompiledCallable`` objects, which advances torch's
      global region counter by two (ids stay unique; nothing else changes).

Report (``torchfix_core.report()``, :data:`ACTED`)
    ``keyed-region-queue`` counts each ``inductor_compiled_code`` call that SAC recorded or replayed
    through its region's own queue (one dict increment in the wrapper's compiled-region branch;
    never for other ops). The behaviour check that :meth:`SacStorageKeyFix.apply` runs after
    patching (and the probe, if the patch is already in place) dispatches three regions through the
    patched modes; they are not counted.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import isolated
from torchfix_core.tallies import tally

#: What the fix did in this process (``torchfix_core.report()``); declared at 0 on import.
ACTED = tally("sac-storage-key", "keyed-region-queue")
COUNTS = ACTED.counts

#: ``__torch_dispatch__`` parameters of both SAC modes in torch 2.10-2.15.
DISPATCH_SIGNATURE = ("self", "func", "types", "args", "kwargs")
#: Names torch's methods use to reach the storage (2.10-2.12): the view implements exactly these.
_CACHING_STORAGE_NAMES = frozenset({"storage", "append"})
_CACHED_STORAGE_NAMES = frozenset({"storage", "get", "pop"})
_UPSTREAM_KEY = "_sac_storage_key"
_HOP_NAME = "inductor_compiled_code"

RegionKey = Callable[[Any], Any]
Dispatch = Callable[..., Any]


class _RegionStorage:
    """``mode.storage`` while one compiled region dispatches: ``hop`` maps to ``key``.

    Supports what torch 2.10-2.12's SAC modes do with their storage (``storage[func]`` on a
    ``defaultdict(list)``, ``storage.get(func)``); any other key passes through unchanged, so a
    nested dispatch through the same mode would still reach its own queue. ``items()`` reads the
    real storage (sac-replay's error explanation lists it from the raising frame's ``self``)."""

    __slots__ = ("storage", "hop", "key")

    def __init__(self, storage: Any, hop: object, key: tuple[object, object]) -> None:
        self.storage = storage
        self.hop = hop
        self.key = key

    def __getitem__(self, func: object) -> Any:
        return self.storage[self.key if func is self.hop else func]

    def get(self, func: object, default: Any = None) -> Any:
        return self.storage.get(self.key if func is self.hop else func, default)

    def items(self) -> Any:
        """The real storage's items (for error explanations that read ``mode.storage``)."""
        return self.storage.items()


def make_keyed_dispatch(original: Dispatch, *, hop: object, region_key: RegionKey) -> Dispatch:
    """``__torch_dispatch__`` that gives each compiled region of ``hop`` its own SAC queue.

    ``original`` is the class attribute as torch installed it. Where torch put it behind
    ``torch._disable_dynamo`` (2.11+: the attribute has ``__wrapped__``), the undecorated function
    is what runs and the result goes behind the same layer, so the number of ``disable`` calls per
    op is unchanged; where torch did not (2.10), neither does the fix (a ``disable`` layer costs
    about 10 us per op there)."""
    import torch

    method: Dispatch = getattr(original, "__wrapped__", original)

    def __torch_dispatch__(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is not hop or not args:
            return method(self, func, types, args, kwargs)
        storage = self.storage
        self.storage = _RegionStorage(storage, hop, (hop, region_key(args[0])))
        COUNTS["keyed-region-queue"] += 1
        try:
            return method(self, func, types, args, kwargs)
        finally:
            self.storage = storage

    # names and __wrapped__ only: method.__dict__ holds torch's cached ``__dynamo_disable`` of the
    # undecorated method, which the disable layer below would then call instead of this wrapper
    functools.update_wrapper(__torch_dispatch__, method, updated=())
    if method is original:
        return __torch_dispatch__
    return torch._disable_dynamo(__torch_dispatch__, recursive=True)


def _callable_itself(region: Any) -> Any:
    """Region key on torch 2.10/2.11: the compiled callable the HOP was called with (its identity)."""
    try:
        hash(region)
    except TypeError:
        return id(region)
    return region


def region_layout() -> tuple[object, RegionKey, Callable[[Callable[[Any], Any]], Any]]:
    """``(hop, region_key, make_region)`` for the installed torch, or PatchRefused.

    ``make_region(fn)`` builds what the HOP is called with for a compiled ``fn(inputs)`` (used by
    the behaviour check). Two layouts are validated: 2.12+ (``InductorCompiledCallable`` with a
    unique ``idx``, ``_resolve_inductor_callable``; ``__call__(self, func, inputs, *, name)``) and
    2.10/2.11 (the bare callable; ``__call__(self, func, *args, **kwargs)``)."""
    import inspect

    import torch._higher_order_ops.wrap as wrap

    hop = getattr(wrap, _HOP_NAME, None)
    if hop is None:
        raise PatchRefused(f"torch._higher_order_ops.wrap.{_HOP_NAME} not found")
    call = type(hop).__dict__.get("__call__")
    if not isinstance(call, types.FunctionType):
        raise PatchRefused(f"{type(hop).__name__}.__call__ is not a Python function")
    params = tuple(inspect.signature(call).parameters)
    resolve = getattr(wrap, "_resolve_inductor_callable", None)
    compiled_callable = getattr(wrap, "InductorCompiledCallable", None)
    if params == ("self", "func", "inputs", "name") and resolve is not None and compiled_callable is not None:

        def region_idx(region: Any) -> Any:
            return resolve(region).idx

        return hop, region_idx, compiled_callable
    if params == ("self", "func", "args", "kwargs") and resolve is None and compiled_callable is None:
        return hop, _callable_itself, lambda fn: fn
    raise PatchRefused(
        f"{_HOP_NAME} has an unknown layout: __call__{params}, _resolve_inductor_callable "
        f"{'present' if resolve else 'absent'}, InductorCompiledCallable {'present' if compiled_callable else 'absent'}"
    )


def replay_returns_other_region(hop: object, make_region: Callable[[Callable[[Any], Any]], Any]) -> bool:
    """True when SAC's replay of a compiled region returns another region's saved output.

    Records two regions under ``create_selective_checkpoint_contexts`` (policy: save
    ``inductor_compiled_code``), replays only the second, as a recompute does when the first one's
    result was cached. Eager, CPU, two one-element tensors; nothing outlives the call."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    first = make_region(lambda inputs: (inputs[0] + 1,))
    second = make_region(lambda inputs: (inputs[0] + 2,))

    def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
        return CheckpointPolicy.MUST_SAVE if op is hop else CheckpointPolicy.PREFER_RECOMPUTE

    caching, cached = create_selective_checkpoint_contexts(policy)
    x = torch.zeros(1)
    with caching:
        hop(first, [x])  # type: ignore[operator]
        hop(second, [x])  # type: ignore[operator]
    with cached:
        (out,) = hop(second, [x])  # type: ignore[operator]
    return bool(out.item() != 2.0)


def _check_uncounted(hop: object, make_region: Callable[[Callable[[Any], Any]], Any]) -> bool:
    """:func:`replay_returns_other_region` with this thread's dispatch modes out of the way
    (:func:`torchfix_core.probes.isolated`), its regions left out of :data:`ACTED` (the check's own
    dispatches through patched modes are not the fix acting on the user's program)."""
    counted = COUNTS["keyed-region-queue"]
    try:
        # out of the caller's modes: the fix may be applied while another fix's probe holds a mode
        # (a trigger imported inside it), whose __torch_dispatch__ takes no higher-order op
        return bool(isolated(lambda: replay_returns_other_region(hop, make_region)))
    finally:
        COUNTS["keyed-region-queue"] = counted


def _check_accessors(cls: type, names: frozenset[str]) -> None:
    raw = cls.__dict__.get("__torch_dispatch__")
    method = getattr(raw, "__wrapped__", raw)
    if not isinstance(method, types.FunctionType):
        raise PatchRefused(f"{cls.__name__}.__torch_dispatch__ is not a Python function")
    from torchfix_core.patching import check_signature

    check_signature(method, DISPATCH_SIGNATURE, f"{cls.__name__}.__torch_dispatch__")
    missing = names - set(method.__code__.co_names)
    if missing:
        raise PatchRefused(f"{cls.__name__}.__torch_dispatch__ does not use {sorted(missing)}: unknown storage layout")


class SacStorageKeyFix(Fix):
    """Key SAC's saved outputs of ``inductor_compiled_code`` per compiled region (pytorch#175258)."""

    def probe(self) -> ProbeResult:
        import torch.utils.checkpoint as ckpt

        if callable(getattr(ckpt, _UPSTREAM_KEY, None)):
            return ProbeResult(
                False, f"torch keys SAC storage per compiled region itself ({_UPSTREAM_KEY}, PR #183080)"
            )
        caching = getattr(ckpt, "_CachingTorchDispatchMode", None)
        cached = getattr(ckpt, "_CachedTorchDispatchMode", None)
        if not isinstance(caching, type) or not isinstance(cached, type):
            raise PatchRefused("torch.utils.checkpoint has no _CachingTorchDispatchMode/_CachedTorchDispatchMode")
        _check_accessors(caching, _CACHING_STORAGE_NAMES)
        _check_accessors(cached, _CACHED_STORAGE_NAMES)
        import torch._higher_order_ops.wrap as wrap

        if not hasattr(wrap, _HOP_NAME):
            # torch 2.8/2.9: compiled code never runs as one op under a dispatch mode, so no region
            # has a queue another region could pop from
            return ProbeResult(
                False,
                f"torch has no {_HOP_NAME} higher-order op: SAC never sees a compiled region as one op",
            )
        hop, _, make_region = region_layout()
        if not _check_uncounted(hop, make_region):
            return ProbeResult(False, f"SAC replay already returns each {_HOP_NAME} region its own output")
        return ProbeResult(
            True,
            f"SAC keeps one FIFO for every {_HOP_NAME} region: a recompute that skips a region pops its outputs",
        )

    def apply(self) -> None:
        import torch.utils.checkpoint as ckpt

        hop, region_key, make_region = region_layout()
        for cls in (ckpt._CachingTorchDispatchMode, ckpt._CachedTorchDispatchMode):
            self.patches.wrap(
                cls,
                "__torch_dispatch__",
                lambda original: make_keyed_dispatch(original, hop=hop, region_key=region_key),
            )
        if _check_uncounted(hop, make_region):
            raise PatchRefused(f"SAC replay still mixes {_HOP_NAME} regions with the patch in place")
