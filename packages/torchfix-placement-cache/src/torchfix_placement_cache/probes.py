"""Behavioural probe: does the live AOTAutograd key term of a DTensor ignore the local shard layout?

No process group is needed and none is created. The probe builds two ``DeviceMesh`` objects with
``_init_backend=False`` and an explicit ``_rank`` (no process group, no store, no global registry
entry; the meshes are dropped when the probe returns), and two DTensors with the same global
``(10, 8)`` ``Shard(0)`` spec as rank 0 (local ``(3, 8)``) and rank 3 (local ``(1, 8)``) of a
4-rank mesh, exactly the layout of the reproduced false hit. Their ``_stable_hash_for_caching()``
values (the term ``AOTAutogradCachePickler._reduce_tensor_subclass`` puts in the cache key) are
compared: equal means the key cannot tell the two shards apart.

The device term is probed the way pytorch/pytorch#188401's test checks it: rank 0's DTensor is hashed,
its ``_local_tensor`` is replaced by a ``meta`` tensor of the same shape and stride (another device,
as on another rank), and it is hashed again: equal means torch's key ignores the local device
(torch 2.12, 2.13: ranks on ``cuda:0`` and ``cuda:1`` with equal shards share an entry).

Only the modules the fix's trigger already imported are used (``torch.distributed.tensor._api``,
``torch.distributed.device_mesh``, ``torch.distributed.tensor.placement_types``), so the probe is
safe to run from the post-import hook of ``torch.distributed.tensor._api``.

Hazard: ``DeviceMesh(..., _init_backend=False, _rank=...)`` is a private constructor argument
(present in torch 2.10-2.15); if it goes away the probe raises ``PatchRefused`` rather than guess.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from torchfix_core import PatchRefused


class KeyProbe(NamedTuple):
    """What :func:`probe_dtensor_key` found."""

    has_stable_hash: bool
    """``DTensor`` defines ``_stable_hash_for_caching`` (the AOTAutograd key term, torch >= 2.12)."""
    ignores_local_shape: bool
    """Rank 0's ``(3, 8)`` shard and rank 3's ``(1, 8)`` shard of one global spec share a key term."""
    ignores_rank: bool
    """Two ranks holding identical ``(3, 8)`` shards share a key term (a legitimate hit)."""
    ignores_device: bool
    """One DTensor hashes alike with its local tensor on ``cpu`` and on ``meta`` (no device term)."""


def _make_dtensor(dtensor_cls: Any, rows: int, rank: int) -> Any:
    import torch
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.placement_types import Shard

    try:
        mesh = DeviceMesh("cpu", torch.arange(4), _init_backend=False, _rank=rank)
    except TypeError as exc:  # the private constructor arguments changed
        raise PatchRefused(f"cannot build a mesh without a process group for the probe: {exc}") from None
    local = torch.empty(rows, 8)
    return dtensor_cls.from_local(local, mesh, [Shard(0)], run_check=False, shape=torch.Size([10, 8]), stride=(8, 1))


def _on_other_device(dtensor: Any) -> Any:
    """``dtensor`` with its local tensor replaced by a ``meta`` tensor of the same shape and stride
    (pytorch/pytorch#188401's test: "a meta-device view to simulate a different rank")."""
    import torch

    local = dtensor._local_tensor
    dtensor._local_tensor = torch.empty_strided(local.shape, local.stride(), dtype=local.dtype, device="meta")
    return dtensor


def probe_dtensor_key(dtensor_cls: Any | None = None, hash_fn: Callable[[Any], str] | None = None) -> KeyProbe:
    """Compare the live ``DTensor._stable_hash_for_caching`` of two uneven shards (see module doc).

    ``dtensor_cls`` defaults to ``torch.distributed.tensor._api.DTensor``; ``hash_fn`` (default: the
    method as installed now, patched or not) lets a caller probe another implementation, e.g. the
    unwrapped original. Raises :class:`torchfix_core.PatchRefused` when the DTensors cannot be built
    or hashed.
    """
    if dtensor_cls is None:
        from torch.distributed.tensor._api import DTensor as dtensor_cls
    if hash_fn is None:
        hash_fn = getattr(dtensor_cls, "_stable_hash_for_caching", None)
    if not callable(hash_fn):
        return KeyProbe(False, False, False, False)
    try:
        rank0 = _make_dtensor(dtensor_cls, 3, 0)
        rank1 = _make_dtensor(dtensor_cls, 3, 1)
        rank3 = _make_dtensor(dtensor_cls, 1, 3)
        h0, h1, h3 = hash_fn(rank0), hash_fn(rank1), hash_fn(rank3)
        h0_meta = hash_fn(_on_other_device(rank0))
    except PatchRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means the layout is not the one we know
        raise PatchRefused(f"probe could not hash a DTensor: {type(exc).__name__}: {exc}") from None
    return KeyProbe(True, h0 == h3, h0 == h1, h0 == h0_meta)
