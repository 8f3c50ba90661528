"""Helpers shared by the tests of torchfix-placement-cache."""

from __future__ import annotations

import inspect


def unpatched_key_probe():  # type: ignore[no-untyped-def]
    """The probe run on torch's own ``_stable_hash_for_caching`` (torchfix's wrapper peeled off)."""
    import torch.distributed.tensor._api as api
    from torchfix_placement_cache.probes import probe_dtensor_key

    raw = api.DTensor.__dict__.get("_stable_hash_for_caching")
    return probe_dtensor_key(api.DTensor, inspect.unwrap(raw) if raw is not None else None)


def bug_present() -> bool:
    """True when torch's own DTensor key term ignores the local shape (torch 2.12-2.15)."""
    return unpatched_key_probe().ignores_local_shape


def expected_state() -> str:
    """The state the fix must reach on this torch: out-of-range outside its range (2.10), else
    applied where the key ignores the local shape (2.12-2.15) and not-needed where it does not (2.11)."""
    from torchfix_core.testing import state_to_expect

    return state_to_expect("placement-cache", bug_present())


def mesh_for_any_rank() -> bool:
    """Whether torch's ``DeviceMesh`` can be built as seen by a chosen rank without a process group
    (its ``_rank`` argument, torch 2.10+); torch 2.8/2.9 ask the default process group for the rank."""
    import inspect

    from torch.distributed.device_mesh import DeviceMesh

    return "_rank" in inspect.signature(DeviceMesh.__init__).parameters


def mesh(shape=(4,), rank=0, names=None):  # type: ignore[no-untyped-def]
    """A CPU ``DeviceMesh`` as seen by ``rank``, built without any process group."""
    import torch
    from torch.distributed.device_mesh import DeviceMesh

    ranks = torch.arange(int(torch.tensor(shape).prod())).reshape(shape)
    return DeviceMesh("cpu", ranks, mesh_dim_names=names, _init_backend=False, _rank=rank)


def dtensor(local, device_mesh, placements, global_shape, requires_grad=False):  # type: ignore[no-untyped-def]
    """``DTensor.from_local`` without communication (global shape given, contiguous stride)."""
    import torch
    from torch.distributed.tensor import DTensor

    shape = torch.Size(global_shape)
    stride = torch.empty(shape, device="meta").stride()
    out = DTensor.from_local(local, device_mesh, placements, run_check=False, shape=shape, stride=stride)
    return out.requires_grad_() if requires_grad else out
