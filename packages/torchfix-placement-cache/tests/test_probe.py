"""The probe decides from the live DTensor key, without a process group."""

from __future__ import annotations

import torch.distributed as dist
import torchfix_core
from _placement_cache_util import expected_state, unpatched_key_probe
from torchfix_placement_cache.probes import probe_dtensor_key


def test_probe_needs_no_process_group() -> None:
    assert not dist.is_initialized()
    probe_dtensor_key()
    unpatched_key_probe()
    assert not dist.is_initialized()


def test_probe_on_unpatched_torch_matches_the_key_builder() -> None:
    import torch.distributed.tensor._api as api

    found = unpatched_key_probe()
    has = "_stable_hash_for_caching" in api.DTensor.__dict__
    assert found.has_stable_hash == has
    # torch 2.12-2.15: the DTensor key has no local shape (the bug); 2.11: no stable key at all
    assert found.ignores_local_shape == has, found
    assert found.ignores_rank == has, found


def test_patched_key_tells_uneven_shards_apart_and_keeps_identical_layouts_together() -> None:
    torchfix_core.apply(only=["placement-cache"])
    state = next(r for r in torchfix_core.status() if r.id == "placement-cache")
    if state.state != "applied":
        assert state.state == expected_state(), state
        return
    found = probe_dtensor_key()
    assert found.has_stable_hash
    assert not found.ignores_local_shape, "rank 0 (3, 8) and rank 3 (1, 8) must get different keys"
    assert found.ignores_rank, "identical (3, 8) shards on ranks 0 and 1 must keep one key"


def test_revert_restores_the_original_key() -> None:
    import torch.distributed.tensor._api as api

    torchfix_core.apply(only=["placement-cache"])
    torchfix_core.revert(only=["placement-cache"])
    assert probe_dtensor_key() == unpatched_key_probe()
    assert not getattr(api.DTensor.__dict__.get("_stable_hash_for_caching"), "__torchfix_fix__", None)
    torchfix_core.apply(only=["placement-cache"])
