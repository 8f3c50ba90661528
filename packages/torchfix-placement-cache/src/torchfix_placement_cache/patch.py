"""The fix: the AOTAutograd cache key of a DTensor input also covers its local shard layout.

The bug
    ``AOTAutogradCachePickler._reduce_tensor_subclass`` (``torch/_functorch/_aot_autograd/
    autograd_cache.py``) puts ``DTensor._stable_hash_for_caching()`` in the cache key of every DTensor
    input. That hash is ``DTensorSpec._stable_hash()`` (mesh rank map, layout, device type, dim names;
    placements, shard order, *global* shape, stride, dtype) plus ``requires_grad`` (torch 2.12, 2.13),
    plus ``str(local_tensor.device)`` (torch 2.14, 2.15, pytorch/pytorch#188401). The local shape is
    not in it. With uneven sharding (global ``(10, 8)`` ``Shard(0)`` on 4 ranks: local ``(3, 8)``
    on ranks 0-2, ``(1, 8)`` on rank 3) every rank computes the same key, so with a shared
    ``TORCHINDUCTOR_CACHE_DIR`` rank 3 loads rank 0's artifact, which asserts
    ``expected size 1==3, stride 8==8 at dim=0`` (or, with size asserts off, computes on the wrong
    shape). The AOTAutograd hit also bypasses the FX graph cache, whose key (local fake tensors) would
    have been right. The 2.14/2.15 device term separates ``cuda:0`` from ``cuda:3`` on one host, but
    not ranks with equal device indices on different hosts, nor CPU ranks.

The patch
    :class:`PlacementCacheFix` wraps ``DTensor._stable_hash_for_caching`` (``torch/distributed/tensor/
    _api.py``; the narrowest point: it is the DTensor term of the key and nothing else in torch 2.12-2.15
    calls it) so that it hashes torch's own value together with the local shard's shape and stride.
    The local shape of a regular (even or uneven) ``Shard`` placement is a function of the rank's mesh
    coordinate, so ranks whose shards differ get different keys, while ranks whose local layout is
    identical (even sharding, ``Replicate``) keep sharing one entry: legitimate cross-rank and
    cross-restart hits survive. Symbolic sizes (dynamic shapes) are hashed as their expression string,
    as torch's FX graph cache pickler does.

    Where torch's own hash has no device term (torch 2.12, 2.13; decided on the live function the
    way pytorch/pytorch#188401's test checks it: the same DTensor hashed with its local tensor on
    ``cpu`` and on ``meta``), the wrapper also hashes ``str(local_tensor.device)``, mirroring #188401:
    ranks on ``cuda:0`` and ``cuda:1`` with equal shards no longer share an artifact compiled for
    one device (#188390: CUDA errors or wrong RNG state). Where torch has the term (2.14+) it is not
    added a second time.

    The rank itself is deliberately not added: an artifact whose graph bakes in the rank coordinate
    (``compile_on_one_rank`` off) has a Dynamo/AOT graph that already differs per rank in the cases we
    measured (``Replicate`` -> ``Shard(0)`` redistribute: miss on every rank, torch 2.13). Frameworks
    that key their own caches can ask :func:`torchfix_placement_cache.input_signature` for the rank.

Other torch compile caches (see docs/fixes/placement-cache.md)
    * Inductor FX graph cache: keyed on the post-AOTAutograd graph with local fake tensors:
      placement-correct by construction; wrong only when reached through an AOTAutograd false hit.
    * ``torch.compiler.save_cache_artifacts`` / ``load_cache_artifacts``: re-serialise entries under
      their original keys, so they inherit the bug and this fix (a mega-cache saved without the fix
      holds entries under the old keys; they are simply never looked up with the fix applied).
    * Precompile / ``DynamoCache``: keyed on the function source, correctness from the serialised
      guards, which compare the DTensor's flatten metadata (spec, requires_grad) and guard the inner
      local tensor like any tensor input (read in the 2.13 source, not measured): not patched.

Hazards
    Applying the fix changes every DTensor AOTAutograd key once: existing entries for DTensor graphs
    are recompiled one time (like any torch upgrade). The wrapper is process-local: all ranks sharing a
    cache must run with the same torchfix state, or they simply never share entries (no false hits).

Upstream: pytorch/pytorch#173526 (stable DTensor key), #188390 / #188401 (local device).
"""

from __future__ import annotations

import functools
import hashlib
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.tallies import tally_and_log

from torchfix_placement_cache._layout import local_layout

#: ``key-changed``: a DTensor's AOTAutograd key term was computed with the local layout added
#: (once per DTensor input per key computation, i.e. per compile or cache lookup, not per step)
ACTED, log = tally_and_log("placement-cache", "key-changed")
COUNTS = ACTED.counts

#: Bumped whenever the extra key material changes, so old and new keys never collide.
KEY_VERSION = "torchfix-placement-cache/1"


def _make_wrapper(original: Callable[[Any], str], *, add_device: bool) -> Callable[[Any], str]:
    """The patched key: torch's own hash + the local shape and stride (+ the local device when
    ``add_device``, i.e. when torch's own hash has no device term: torch 2.12, 2.13)."""

    @functools.wraps(original)
    def _stable_hash_for_caching(self: Any) -> str:
        base = original(self)
        local = getattr(self, "_local_tensor", None)
        if local is None:  # not a regular DTensor instance: leave torch's key alone
            return base
        shape, stride = local_layout(local)
        payload = f"{base}|{KEY_VERSION}|local_shape={shape!r}|local_stride={stride!r}"
        if add_device:  # pytorch/pytorch#188401: cache_data += str(self._local_tensor.device)
            payload += f"|local_device={local.device}"
        COUNTS["key-changed"] += 1
        return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()

    return _stable_hash_for_caching


class PlacementCacheFix(Fix):
    """Adds the local shard layout to ``DTensor._stable_hash_for_caching`` (see the module doc)."""

    def probe(self) -> ProbeResult:
        from torch.distributed.tensor import _api

        from torchfix_placement_cache.probes import probe_dtensor_key

        dtensor = getattr(_api, "DTensor", None)
        if not isinstance(dtensor, type):
            raise PatchRefused("torch.distributed.tensor._api.DTensor is not a class")
        raw = dtensor.__dict__.get("_stable_hash_for_caching")
        if raw is None:
            return ProbeResult(
                False,
                "DTensor has no _stable_hash_for_caching: the AOTAutograd cache key pickles DTensor inputs "
                "with their storage, so DTensor graphs never hit it across processes (no false hit)",
            )
        if not isinstance(raw, types.FunctionType):
            raise PatchRefused(f"DTensor._stable_hash_for_caching is a {type(raw).__name__}, expected a function")
        found = probe_dtensor_key(dtensor)
        if not found.ignores_local_shape and not found.ignores_device:
            return ProbeResult(
                False, "DTensor._stable_hash_for_caching already tells uneven local shards and local devices apart"
            )
        missing = [
            *(
                ["rank 0's (3, 8) and rank 3's (1, 8) shard of a global (10, 8) Shard(0) tensor"]
                if found.ignores_local_shape
                else []
            ),
            *(
                ["one shard on cpu and on meta (another device: pytorch/pytorch#188390)"]
                if found.ignores_device
                else []
            ),
        ]
        return ProbeResult(
            True,
            f"DTensor._stable_hash_for_caching gives {' and '.join(missing)} the same AOTAutograd key: "
            "a shared cache loads the wrong artifact",
        )

    def apply(self) -> None:
        from torch.distributed.tensor import _api

        from torchfix_placement_cache.probes import probe_dtensor_key

        raw = _api.DTensor.__dict__.get("_stable_hash_for_caching")
        add_device = probe_dtensor_key(_api.DTensor, raw).ignores_device

        def make(original: Callable[[Any], str]) -> Callable[[Any], str]:
            return _make_wrapper(original, add_device=add_device)

        self.patches.wrap(_api.DTensor, "_stable_hash_for_caching", make, signature=("self",))
        log.debug(
            "placement-cache: DTensor AOTAutograd keys now cover the local shape and stride%s",
            " and the local device" if add_device else "",
        )
