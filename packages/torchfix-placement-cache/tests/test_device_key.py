"""placement-cache and pytorch/pytorch#188390: ranks on different devices must not share a DTensor key.

torch 2.12 and 2.13 hash a DTensor for the AOTAutograd cache without its local device
(``DTensor._stable_hash_for_caching``), so ranks on ``cuda:0`` and ``cuda:1`` with equal local shards
share an artifact compiled for one device; torch 2.14 adds ``str(self._local_tensor.device)``
(PR #188401). The port of that PR's test, ``test_stable_hash_for_caching_is_rank_specific``, runs on
CPU: a DTensor's key is recorded, its ``_local_tensor`` is replaced by a meta-device tensor of the
same shape ("to simulate a different rank"), and the two keys must differ. Each run is a fresh
interpreter: without the fix (``TORCHFIX_DISABLE=placement-cache``) and with it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import run_json_script
from torchfix_core.testing.fixtures import with_and_without_fix

HERE = Path(__file__).resolve().parent

PR_188401_TEST = """
import hashlib, inspect, json
import torch
import torch.distributed.tensor._api as api
from torch.distributed.tensor import Shard
from _placement_cache_util import dtensor, mesh

dt = dtensor(torch.randn(4, 8), mesh((2,), rank=0), [Shard(0)], (8, 8))
key_cpu = dt._stable_hash_for_caching()
raw = api.DTensor.__dict__.get("_stable_hash_for_caching")
torch_cpu = inspect.unwrap(raw)(dt)
# simulate a different rank: the local tensor on another device, same shape and stride
dt._local_tensor = dt._local_tensor.to("meta")
key_meta = dt._stable_hash_for_caching()
torch_meta = inspect.unwrap(raw)(dt)
import torchfix_core
state = next(str(r.state) for r in torchfix_core.status() if r.id == "placement-cache")
def torchfix_key(base, device=None):
    payload = f"{base}|torchfix-placement-cache/1|local_shape=(4, 8)|local_stride=(8, 1)"
    if device is not None:
        payload += f"|local_device={device}"
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
print(json.dumps(dict(
    key_cpu=key_cpu, key_meta=key_meta, torch_cpu=torch_cpu, torch_meta=torch_meta, state=state,
    torchfix_no_device=torchfix_key(torch_cpu), torchfix_device=torchfix_key(torch_cpu, "cpu"),
)))
"""


pytestmark = pytest.mark.skipif(
    "not __import__('_placement_cache_util').mesh_for_any_rank()",
    reason="torch's DeviceMesh takes its rank from a process group here (no _rank argument: torch < 2.10)",
)


def _run(fix: bool) -> dict[str, Any]:
    if not _has_stable_hash():  # before the script, which calls it (the fixtures' setup would error)
        pytest.skip("no _stable_hash_for_caching on this torch (2.10/2.11): DTensor graphs never hit across processes")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    if not fix:
        env["TORCHFIX_DISABLE"] = "placement-cache"
    return run_json_script(["-c", PR_188401_TEST], env=env, timeout=300)


def _has_stable_hash() -> bool:
    import torch.distributed.tensor._api as api

    return "_stable_hash_for_caching" in api.DTensor.__dict__


with_fix, without_fix = with_and_without_fix(_run, scope="module")


def test_device_blind_key_without_fix(without_fix: dict[str, Any]) -> None:
    """torch 2.12/2.13: PR #188401's assertion (keys differ) fails on torch's own key."""
    if without_fix["torch_cpu"] != without_fix["torch_meta"]:
        pytest.skip("torch's own DTensor key has the local device term here (torch 2.14+, PR #188401)")
    assert without_fix["key_cpu"] == without_fix["key_meta"], without_fix


def test_key_is_rank_specific_with_fix(with_fix: dict[str, Any]) -> None:
    """PR #188401's test, with the fix: the key changes with the local tensor's device."""
    assert with_fix["state"] == "applied", with_fix
    assert with_fix["key_cpu"] != with_fix["key_meta"], with_fix


def test_device_term_is_added_once(with_fix: dict[str, Any]) -> None:
    """torch 2.14+ keeps its own device term and torchfix adds none; on 2.12/2.13 torchfix adds it."""
    torch_has_device = with_fix["torch_cpu"] != with_fix["torch_meta"]
    expected = with_fix["torchfix_no_device"] if torch_has_device else with_fix["torchfix_device"]
    assert with_fix["key_cpu"] == expected, with_fix
