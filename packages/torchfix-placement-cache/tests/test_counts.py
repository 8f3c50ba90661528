"""What aot-hop-body-key's counter counts in a default configuration (inductor on CPU, the AOTAutograd
and FX graph caches on, torch's default checkpoint settings).

``_aot_cache_key_scenarios.py checkpointed``: ``sum(checkpoint(body, x, use_reentrant=False))``
compiled with inductor, forward and backward. With a body that calls an opaque
``allow_in_graph`` callable, ``body-bypassed`` is 1 per compile: one refused body node, one
AOTAutograd bypass, in each process alike (a bypassed graph is never saved, so a second process
sharing the cache directory compiles and counts again). A body of torch ops counts nothing and is
cached as before. Where the fix is not applied on the running torch, nothing is counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _aot_cache_key_util as util
import pytest

HOP_BODY = "aot-hop-body-key"


def _run(body: str, cache_dir: Path) -> dict[str, Any]:
    return util.run(HOP_BODY, True, cache_dir, "checkpointed", body)


def _report(result: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = result["reports"][HOP_BODY]
    if report["state"] != "applied":
        assert report["acted"] == 0, report
        pytest.skip(f"aot-hop-body-key is {report['state']} on torch {result['torch']}: counted nothing")
    return report


def test_opaque_checkpoint_body_counts_once_per_compile_in_every_process(tmp_path: Path) -> None:
    for process in (1, 2):  # the second shares the cache directory: nothing was saved, it compiles again
        result = _run("opaque", tmp_path)
        report = _report(result)
        assert result["out_ok"] and result["grad_ok"], result
        assert report["events"] == {"body-bypassed": 1}, (process, result)
        assert result["counters"].get("autograd_cache_bypass") == 1, (process, result)
        assert not result["counters"].get("autograd_cache_hit"), (process, result)


def test_plain_checkpoint_body_counts_nothing_and_is_cached(tmp_path: Path) -> None:
    result = _run("plain", tmp_path)
    report = _report(result)
    assert result["out_ok"] and result["grad_ok"], result
    assert report["events"] == {"body-bypassed": 0} and report["acted"] == 0, result
    assert result["counters"].get("autograd_cache_saved") == 1, result
