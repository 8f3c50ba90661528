"""``input_signature``: what it tells apart, what it keeps together, and that it is process-stable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from _placement_cache_util import dtensor, mesh
from torch.distributed.tensor import Replicate, Shard
from torchfix_placement_cache import input_signature

GLOBAL = (10, 8)


pytestmark = pytest.mark.skipif(
    "not __import__('_placement_cache_util').mesh_for_any_rank()",
    reason="torch's DeviceMesh takes its rank from a process group here (no _rank argument: torch < 2.10)",
)


def _shard0(rank: int, rows: int, **kw: object) -> object:
    return dtensor(torch.zeros(rows, 8), mesh(rank=rank), [Shard(0)], GLOBAL, **kw)


def test_package_import_does_not_import_torch() -> None:
    code = (
        "import sys, torchfix_placement_cache as p; assert callable(p.input_signature); print('torch' in sys.modules)"
    )
    env = {**os.environ, "TORCHFIX_AUTOLOAD": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_signature_is_a_hex_digest_and_deterministic() -> None:
    sig = input_signature([_shard0(0, 3)])
    assert len(sig) == 64 and int(sig, 16) >= 0
    assert sig == input_signature([_shard0(0, 3)])


def test_signature_separates_uneven_shards() -> None:
    # rank 0 holds (3, 8), rank 3 holds (1, 8) of one global (10, 8) Shard(0) tensor
    assert input_signature([_shard0(0, 3)]) != input_signature([_shard0(3, 1)])


def test_signature_keeps_identical_local_layouts_together() -> None:
    assert input_signature([_shard0(0, 3)]) == input_signature([_shard0(1, 3)])


def test_signature_with_rank_separates_ranks() -> None:
    assert input_signature([_shard0(0, 3)], include_rank=True) != input_signature([_shard0(1, 3)], include_rank=True)


def test_signature_separates_placements() -> None:
    full = torch.zeros(8, 8)
    m = mesh()
    s0 = dtensor(torch.zeros(2, 8), m, [Shard(0)], (8, 8))
    s1 = dtensor(torch.zeros(8, 2), m, [Shard(1)], (8, 8))
    rep = dtensor(full, m, [Replicate()], (8, 8))
    sigs = {input_signature([x]) for x in (s0, s1, rep)}
    assert len(sigs) == 3


def test_signature_separates_fully_shard_from_replicate_with_equal_local_shape() -> None:
    # global (8, 8) Shard(0) on 4 ranks vs global (2, 8) Replicate: both local (2, 8)
    m = mesh()
    sharded = dtensor(torch.zeros(2, 8), m, [Shard(0)], (8, 8))
    replicated = dtensor(torch.zeros(2, 8), m, [Replicate()], (2, 8))
    assert input_signature([sharded]) != input_signature([replicated])


def test_signature_separates_meshes() -> None:
    local = torch.zeros(2, 8)
    flat = dtensor(local, mesh((4,)), [Shard(0)], (8, 8))
    flat_named = dtensor(local, mesh((4,), names=("dp",)), [Shard(0)], (8, 8))
    two_d = dtensor(torch.zeros(4, 8), mesh((2, 2), names=("dp", "tp")), [Shard(0), Replicate()], (8, 8))
    two_d_other_names = dtensor(torch.zeros(4, 8), mesh((2, 2), names=("pp", "tp")), [Shard(0), Replicate()], (8, 8))
    assert len({input_signature([x]) for x in (flat, flat_named, two_d, two_d_other_names)}) == 4


def test_signature_separates_dtype_and_requires_grad() -> None:
    m = mesh()
    f32 = dtensor(torch.zeros(2, 8), m, [Shard(0)], (8, 8))
    bf16 = dtensor(torch.zeros(2, 8, dtype=torch.bfloat16), m, [Shard(0)], (8, 8))
    grad = dtensor(torch.zeros(2, 8), m, [Shard(0)], (8, 8), requires_grad=True)
    assert len({input_signature([x]) for x in (f32, bf16, grad)}) == 3


def test_signature_of_plain_tensors_covers_layout_not_values() -> None:
    a = torch.zeros(4, 8)
    assert input_signature([a]) == input_signature([torch.ones(4, 8)])
    assert input_signature([a]) != input_signature([torch.zeros(8, 4).t()])  # same shape, other stride
    assert input_signature([a]) != input_signature([torch.zeros(4, 8, dtype=torch.float16)])
    assert input_signature([a]) != input_signature([torch.zeros(4, 9)])
    assert input_signature([a, 3]) != input_signature([a, 4])
    assert input_signature([a]) != input_signature([a, a])


def test_signature_of_fake_inputs_equals_real_inputs() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = [torch.zeros(4, 8), torch.zeros(3)]
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) for t in real]
    assert input_signature(fake) == input_signature(real)


def test_signature_ignores_graph_code_by_construction() -> None:
    # the same inputs give the same key whatever function they feed: the caller adds source/config
    x = _shard0(0, 3)
    assert input_signature([x]) == input_signature((x,))


_CHILD = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from _placement_cache_util import dtensor, mesh
from torch.distributed.tensor import Shard, Replicate
from torchfix_placement_cache import input_signature
import torchfix_core
torchfix_core.apply(only=["placement-cache"])
x = dtensor(torch.zeros(3, 8), mesh(rank=0), [Shard(0)], (10, 8))
y = dtensor(torch.zeros(2, 8, dtype=torch.bfloat16), mesh((2, 2), names=("dp", "tp")), [Shard(0), Replicate()], (4, 8))
print(json.dumps({"sig": input_signature([x, y, torch.zeros(4, 8), 7]),
                  "key": x._stable_hash_for_caching() if hasattr(x, "_stable_hash_for_caching") else None}))
"""


@pytest.mark.parametrize("seeds", [("0", "12345")])
def test_signature_and_patched_key_are_stable_across_processes(seeds: tuple[str, str]) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    results = []
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": seed, "TORCHFIX_AUTOLOAD": "0"}
        out = subprocess.run([sys.executable, "-c", _CHILD, here], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]
