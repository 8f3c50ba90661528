"""GPU: two ranks on the same device index (``cuda:0``), as on two hosts sharing one cache.

torch 2.14/2.15 add ``str(local_tensor.device)`` to the DTensor key, which separates ``cuda:0`` from
``cuda:1`` on one host but not equal indices on different hosts. Both ranks here run on ``cuda:0``
(``CUDA_VISIBLE_DEVICES=0``, gloo process group; the compiled function has no collective), global
``(3, 8)`` ``Shard(0)``: rank 0 holds ``(2, 8)``, rank 1 holds ``(1, 8)``.

Run: ``python -m pytest packages/torchfix-placement-cache/tests -m gpu -v`` with torch,
torchfix-core and torchfix-placement-cache installed (one GPU is enough).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _multirank import run_job
from _placement_cache_util import bug_present

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _aot(report: dict[str, Any], name: str) -> int:
    return int(report["counters"][f"autograd_cache_{name}"])


@pytest.mark.skipif(not bug_present(), reason="no shape-blind DTensor key on this torch")
def test_same_device_index_uneven_false_hit_fails_without_fix() -> None:
    rank0, rank1 = run_job("uneven", fix="off", world=2, device="cuda")
    assert rank0["ok"] and _aot(rank0, "miss") == 1, rank0
    assert _aot(rank1, "hit") == 1 and not rank1["ok"], rank1


def test_same_device_index_uneven_passes_with_fix() -> None:
    reports = run_job("uneven", fix="api", world=2, device="cuda")
    for report in reports:
        assert report["ok"], report
    if bug_present():
        assert _aot(reports[1], "hit") == 0, reports[1]


def test_same_device_index_even_still_hits_with_fix() -> None:
    rank0, rank1 = run_job("even", fix="api", world=2, device="cuda")
    assert rank0["ok"] and rank1["ok"], (rank0, rank1)
    if bug_present():
        assert _aot(rank1, "hit") == 1, rank1
