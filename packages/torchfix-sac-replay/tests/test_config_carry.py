"""The recompute reads the forward's config on any thread (in-process; revert() = without the fix)."""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator

import pytest
import torch
import torch._dynamo
import torchfix_core
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import _CheckpointFrame, checkpoint, create_selective_checkpoint_contexts
from torchfix_sac_replay.carry import ForwardContextRecompute
from torchfix_sac_replay.reproduction_sac_replay import on_thread

FORWARD = {"recompile_limit": 64, "capture_scalar_outputs": True, "dynamic_sources": "L['n']"}
DEFAULTS = {"recompile_limit": 8, "capture_scalar_outputs": False, "dynamic_sources": ""}


def _read() -> dict[str, Any]:
    return {
        "recompile_limit": torch._dynamo.config.recompile_limit,
        "capture_scalar_outputs": torch._dynamo.config.capture_scalar_outputs,
        "dynamic_sources": torch.compiler.config.dynamic_sources,
    }


@contextlib.contextmanager
def _forward_config(limit: int = 64) -> Iterator[None]:
    with torch._dynamo.config.patch(recompile_limit=limit, capture_scalar_outputs=True):
        with torch.compiler.config.patch(dynamic_sources="L['n']"):
            yield


def _checkpointed(layout: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    if layout == "checkpoint":
        return lambda x: checkpoint(fn, x, use_reentrant=False)

    class Block(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return fn(x)

    return checkpoint_wrapper(Block())


def _record_config_in_recompute(layout: str) -> tuple[dict[str, Any], dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(_read())
        return x.sin().cos()

    x = torch.randn(8, requires_grad=True)
    with _forward_config():
        out = _checkpointed(layout, fn)(x)
    with _forward_config():  # the forward thread keeps its settings; the recompute runs elsewhere
        on_thread(lambda: out.sum().backward(), "backward")
    assert len(seen) == 2, seen
    return seen[0], seen[1]


@pytest.fixture
def fix_off(fix_on: None) -> Iterator[None]:
    torchfix_core.revert(only=["sac-replay"])
    try:
        yield
    finally:
        torchfix_core.apply(only=["sac-replay"])


@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint_wrapper"])
def test_recompute_reads_default_config_without_fix(layout: str, fix_off: None) -> None:
    forward, recompute = _record_config_in_recompute(layout)
    assert forward == FORWARD
    assert recompute == DEFAULTS


@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint_wrapper"])
def test_recompute_reads_forward_config_with_fix(layout: str, fix_on: None) -> None:
    forward, recompute = _record_config_in_recompute(layout)
    assert forward == FORWARD
    assert recompute == FORWARD


def test_recompute_config_changes_stay_inside_the_recompute(fix_on: None) -> None:
    """The recompute runs in a copy of the forward's context: a value the checkpointed code sets
    while recomputing does not leak into the thread that runs backward (without the fix, a
    same-thread backward would keep the recompute's 99)."""
    calls = {"n": 0}

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 2:  # the recompute
            torch._dynamo.config.recompile_limit = 99
        return x.sin()

    with torch._dynamo.config.patch(recompile_limit=8):
        x = torch.randn(3, requires_grad=True)
        out = checkpoint(fn, x, use_reentrant=False)
        out.sum().backward()  # same thread
        assert calls["n"] == 2
        assert torch._dynamo.config.recompile_limit == 8


def test_eight_threads_run_independent_checkpointed_steps_with_fix(fix_on: None) -> None:
    """8 threads, each with its own config, run SAC-checkpointed compiled steps concurrently; each step's
    backward runs on yet another thread; every recompute sees its own forward's config and every
    gradient equals the un-checkpointed reference."""

    def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w).sin()

    compiled = torch.compile(math, dynamic=False)
    torch.manual_seed(0)
    w0 = torch.randn(16, 16)
    compiled(torch.randn(4, 16, requires_grad=True), w0.clone().requires_grad_())  # warm: no compile in threads
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []
    results: dict[int, list[tuple[int, int, bool]]] = {}

    def worker(i: int) -> None:
        try:
            mine = 100 + i
            torch._dynamo.config.recompile_limit = mine  # this thread's own context
            gen = torch.Generator().manual_seed(i)
            rows: list[tuple[int, int, bool]] = []
            barrier.wait()
            for _ in range(3):
                seen: list[int] = []

                def region(x: torch.Tensor, w: torch.Tensor, seen: list[int] = seen) -> torch.Tensor:
                    seen.append(torch._dynamo.config.recompile_limit)
                    return compiled(x, w)

                x = torch.randn(4, 16, generator=gen, requires_grad=True)
                w = w0.clone().requires_grad_()
                out = checkpoint(region, x, w, use_reentrant=False, context_fn=sac)
                on_thread(lambda: out.sum().backward(), "backward")  # noqa: B023 - joined right here
                xr, wr = x.detach().clone().requires_grad_(), w0.clone().requires_grad_()
                math(xr, wr).sum().backward()
                same = torch.allclose(x.grad, xr.grad, atol=1e-5) and torch.allclose(w.grad, wr.grad, atol=1e-5)
                rows.append((seen[0], seen[1], bool(same)))
            results[i] = rows
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(8):
        assert results[i] == [(100 + i, 100 + i, True)] * 3, (i, results[i])


def test_frames_built_while_compiling_are_left_untouched(fix_on: None) -> None:
    """torch.compile(checkpoint_wrapper(block)): the frames AOTAutograd builds while tracing the
    checkpoint HOP keep torch's own recompute_fn; eager frames get the forward-context wrapper."""
    kinds: list[tuple[bool, bool]] = []
    patched_init = _CheckpointFrame.__dict__["__init__"]

    def spy(self: Any, *args: Any) -> None:
        patched_init(self, *args)
        kinds.append((torch.compiler.is_compiling(), isinstance(self.recompute_fn, ForwardContextRecompute)))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.lin(x)).sin()

    block = Block()
    x = torch.randn(4, 8, requires_grad=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_CheckpointFrame, "__init__", spy)
        compiled = torch.compile(checkpoint_wrapper(block), backend="aot_eager")
        compiled(x).sum().backward()
        in_compile = list(kinds)
        kinds.clear()
        checkpoint_wrapper(block)(x).sum().backward()
        eager = list(kinds)
    assert in_compile, "AOTAutograd should have traced the checkpoint (frames built while compiling)"
    assert all(not wrapped for _, wrapped in in_compile), in_compile
    assert eager == [(False, True)], eager
