"""Inductor's remote caches on a real Redis server: the multi-host form of the placement-cache bug.

Four rank processes (gloo), each with its own private ``TORCHINDUCTOR_CACHE_DIR``, share one
``redis-server`` through ``TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1`` /
``TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1`` and ``TORCHINDUCTOR_REDIS_HOST`` / ``_PORT``. All run on
the same device (CPU), as equal device indices on different hosts do, so torch 2.14's device term in
the DTensor key does not separate them. Every cache hit below therefore came from Redis. See
``_redis_cache_job`` for the training steps each rank runs.

Needs the ``redis-server`` binary (Debian package ``redis-server``) and the ``redis`` client
(registry); the ``redis_cache`` nox session installs the client and runs this file. Each job costs
30-90 s on a 2-core box.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

pytest.importorskip("redis", reason="the redis client is not installed (nox -s redis_cache installs it)")
if shutil.which("redis-server") is None:
    pytest.skip("no redis-server binary: install the Debian package redis-server", allow_module_level=True)

from _placement_cache_util import bug_present, expected_state  # noqa: E402
from _redis_cache_job import run_redis_job  # noqa: E402
from torchfix_core.reproduction import RedisServer, free_port  # noqa: E402

pytestmark = pytest.mark.slow
BUG = bug_present()
needs_bug = pytest.mark.skipif(not BUG, reason="torch's DTensor AOTAutograd key has no stable form here (no false hit)")


def _aot(report: dict[str, Any], name: str) -> int:
    return int(report["counters"][f"autograd_cache_{name}"])


def _job(fix: str) -> tuple[list[dict[str, Any]], list[str]]:
    """One uneven job on a fresh server: per-rank reports and the keys the server holds after it."""
    with RedisServer() as server:
        reports = run_redis_job("uneven", port=server.port, fix=fix)
        return reports, server.keys()


@pytest.fixture(scope="module")
def without_fix() -> tuple[list[dict[str, Any]], list[str]]:
    return _job("off")


@pytest.fixture(scope="module")
def with_fix() -> tuple[list[dict[str, Any]], list[str]]:
    return _job("api")


def _aot_keys(keys: list[str]) -> list[str]:
    return [k for k in keys if k.startswith("pt2:autograd")]


@needs_bug
def test_uneven_shards_sharing_redis_false_hit_fails_without_fix(
    without_fix: tuple[list[dict[str, Any]], list[str]],
) -> None:
    reports, keys = without_fix
    rank0, rank3 = reports[0], reports[3]
    assert rank0["local_shape"] == [3, 8] and rank3["local_shape"] == [1, 8]
    assert rank0["ok"] and _aot(rank0, "miss") == 1, rank0
    assert len(_aot_keys(keys)) == 1, keys  # one AOTAutograd entry for two local layouts
    # rank 3, whose private local cache is empty, loads rank 0's (3, 8) artifact from Redis ...
    assert _aot(rank3, "hit") == 1, rank3
    # ... and its training step fails in the generated size assert (or would compute on the wrong shape)
    assert not rank3["ok"], rank3
    assert "expected size 1==3" in (rank3["error"] or "") or rank3["error"] == "compiled steps differ from eager"


def test_uneven_shards_sharing_redis_pass_with_fix(with_fix: tuple[list[dict[str, Any]], list[str]]) -> None:
    reports, keys = with_fix
    assert {r["fix_state"] for r in reports} == {expected_state()}
    for report in reports:
        assert report["ok"], report
    if BUG:
        assert _aot(reports[3], "miss") == 1 and _aot(reports[3], "hit") == 0, reports[3]
        assert len(_aot_keys(keys)) == 2, keys  # one entry per local layout


@needs_bug
def test_equal_shards_keep_their_redis_hits_with_fix(with_fix: tuple[list[dict[str, Any]], list[str]]) -> None:
    reports, _keys = with_fix
    # ranks 1 and 2 hold the same (3, 8) shard as rank 0: they load its entries from Redis
    for report in reports[1:3]:
        assert report["local_shape"] == [3, 8]
        assert _aot(report, "hit") == 1 and report["counters"]["fxgraph_cache_hit"] >= 1, report
        assert report["counters"]["fxgraph_cache_miss"] == 0, report


def test_training_survives_a_redis_server_that_refuses_connections() -> None:
    # nothing listens on the port: torch's Redis backend drops the remote cache on the first
    # ConnectionError and every rank compiles locally
    reports = run_redis_job("even", port=free_port(), fix="api", world=2)
    for report in reports:
        assert report["ok"], report
        assert _aot(report, "miss") == 1 and _aot(report, "hit") == 0, report
        assert report["counters"]["fxgraph_cache_hit"] == 0, report
    assert reports[0]["losses"] != reports[1]["losses"]  # each rank trained its own shard
