"""The per-checkpoint path is O(1): it never walks Dynamo's counters (counted, not timed).

A large model records thousands of graph-break reasons in ``torch._dynamo.utils.counters
["unimplemented"]``; a recompute that walked them (as sac-replay's pre-recompute snapshot once did:
+91 us per checkpoint at 1,000 reasons, issue 14) grows with the process's history. Here every
Dynamo counter mapping is replaced by one that counts each walk (iteration, ``items()``, ``keys()``,
``values()``, copies), 10,000 reasons are recorded, and checkpoints are run forward and backward on
the forward thread and on a worker thread: the walks must stay at zero. Timing lives in
``benchmarks/recompute_overhead.py``.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterator, TypeVar

import pytest
import torch
import torch._dynamo
import torch._dynamo.utils
from torch.utils.checkpoint import _CheckpointFrame, checkpoint
from torchfix_sac_replay import explain
from torchfix_sac_replay.carry import ForwardContextRecompute
from torchfix_sac_replay.reproduction_sac_replay import on_thread

REASONS = 10_000
C = TypeVar("C", bound=type)


def _counting_walks(*names: str) -> Callable[[C], C]:
    """Class decorator: each of the base mapping's methods ``names`` adds one to
    ``WalkCounting.walks``, then does what the base does."""

    def decorate(cls: C) -> C:
        base = cls.__mro__[1]
        for name in names:

            def walk(self: Any, *args: Any, _base: Callable[..., Any] = getattr(base, name)) -> Any:
                WalkCounting.walks += 1
                return _base(self, *args)

            setattr(cls, name, walk)
        return cls

    return decorate


@_counting_walks("__iter__", "items", "keys", "values", "copy", "__reduce__")
class WalkCounting(collections.Counter):  # type: ignore[type-arg]
    """A ``Counter`` that counts every walk over its entries (single-key reads are not walks)."""

    walks = 0


@_counting_walks("__iter__", "items", "values")
class CategoryWalkCounting(collections.defaultdict):  # type: ignore[type-arg]
    """``counters`` itself (category -> Counter), counting walks over the categories."""


@pytest.fixture
def counting_counters(monkeypatch: pytest.MonkeyPatch) -> Iterator[WalkCounting]:
    """Dynamo's counters with 10,000 graph-break reasons, every mapping counting its walks."""
    original = torch._dynamo.utils.counters
    replaced = CategoryWalkCounting(WalkCounting)
    for category, counter in list(original.items()):
        replaced[category] = WalkCounting(dict(counter))
    unimplemented = WalkCounting()
    for i in range(REASONS):
        unimplemented[f"Graph break reason {i}: call to an unsupported function (synthetic, recorded by the test)"] += 1
    replaced["unimplemented"] = unimplemented
    replaced["frames"] = WalkCounting({"total": 3, "ok": 3})
    monkeypatch.setattr(torch._dynamo.utils, "counters", replaced)
    WalkCounting.walks = 0
    yield unimplemented


def _run_checkpoints(n: int, backward: Callable[[torch.Tensor], None]) -> tuple[int, int]:
    """n checkpoints forward, one backward; returns (calls of the checkpointed function, frames wrapped)."""
    calls = {"n": 0}
    wrapped = {"n": 0}
    patched_init = _CheckpointFrame.__dict__["__init__"]

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        return x.sin()

    def spy(self: Any, *args: Any) -> None:
        patched_init(self, *args)
        wrapped["n"] += isinstance(self.recompute_fn, ForwardContextRecompute)

    x = torch.randn(16, requires_grad=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_CheckpointFrame, "__init__", spy)
        outs = [checkpoint(fn, x, use_reentrant=False) for _ in range(n)]
    backward(torch.stack(outs).sum())
    return calls["n"], wrapped["n"]


@pytest.mark.parametrize("thread", ["forward", "worker"])
def test_checkpoint_frame_and_recompute_never_walk_dynamo_counters(
    thread: str, fix_on: None, counting_counters: WalkCounting
) -> None:
    backward = (
        (lambda loss: on_thread(loss.backward, "worker")) if thread == "worker" else (lambda loss: loss.backward())
    )
    calls, wrapped = _run_checkpoints(50, backward)
    assert wrapped == 50, "every frame should carry the forward's context"
    assert calls == 100, "each checkpoint should run once in the forward and once in the recompute"
    assert WalkCounting.walks == 0, f"the checkpoint path walked Dynamo's counters {WalkCounting.walks} time(s)"


def test_walk_counting_counters_detect_the_old_pre_recompute_snapshot(counting_counters: WalkCounting) -> None:
    """Control: the removed O(history) snapshot (sum over ``tuple(unimplemented.items())``) is counted."""
    unimplemented = torch._dynamo.utils.counters.get("unimplemented")
    sum(v for k, v in tuple(unimplemented.items()) if "recompile limit" in str(k).lower())
    assert WalkCounting.walks == 1


def test_marks_are_plain_ints_read_in_constant_time(counting_counters: WalkCounting) -> None:
    marks = explain.dynamo_marks()
    assert type(marks) is tuple and all(type(v) is int for v in marks) and marks[:2] == (3, 3)
    assert WalkCounting.walks == 0


def test_recompile_limit_hits_without_compilation_records_infers_from_reasons(
    counting_counters: WalkCounting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Dynamo keeps no compilation records, the error path (only) walks the reasons."""
    monkeypatch.delattr(torch._dynamo.utils, "_compilation_metrics", raising=False)
    assert explain.recompile_limit_hits(0, failed_frames=0) == (0, True)
    assert explain.recompile_limit_hits(0, failed_frames=2) == (0, False)
    counting_counters["Dynamo recompile limit exceeded\n  Explanation: ... (currently set to 9)"] += 1
    assert explain.recompile_limit_hits(0, failed_frames=2) == (2, False)
    assert WalkCounting.walks >= 1  # error path: walking is allowed there


def test_thread_name_is_resolved_from_the_ident() -> None:
    assert explain.thread_name(threading.get_ident()) == threading.current_thread().name
    assert "no longer running" in explain.thread_name(-1)
