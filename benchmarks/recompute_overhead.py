"""Cost per checkpoint of each way to give a recompute the forward's compiler config, side by side.

    python benchmarks/recompute_overhead.py [--rounds 41] [--block 200] [--reasons 10000] [--sac]

One process, alternating blocks. Approaches (all on ``checkpoint(f, x, use_reentrant=False)`` of a
tiny eager op, ``sin`` of 16 floats, forward + backward):

* ``no fix``: torch as it is (sac-replay reverted through ``torchfix_core.revert``);
* ``torchfix``: sac-replay applied (``torchfix_core.apply(only=["sac-replay"])``): the recompute runs
  in a copy of the forward's whole contextvars context;
* ``prime-rl #3951``: written here as a baseline only. The checkpoint's ``context_fn`` is wrapped so
  that the forward reads ``torch._dynamo.config.recompile_limit``, ``capture_scalar_outputs`` and
  ``torch.compiler.config.dynamic_sources`` and the recompute re-enters them with ``config.patch``
  (the three named settings, SAC callers only, as that PR does);
* ``pytorch #186583``: the closed PR propagates the ``backward()`` caller's context to the engine's
  worker threads in C++ and runs Python callbacks there in a copy of it. Its Python expression here:
  the recompute runs in a copy of the context the engine stashes for the running backward
  (``torch._C._get_obj_in_tls("context")``, torch 2.13+). It carries the backward *caller's* context,
  not the forward's, and its Python form adds a closure per frame that the C++ version would not.

Cells: 0 and ``--reasons`` graph-break reasons recorded in ``torch._dynamo.utils.counters
["unimplemented"]`` (synthetic keys, as a large model with many graph breaks accumulates), backward on
the forward thread and on a worker thread (a persistent ``threading.Thread``: the CPU stand-in for
CUDA's autograd worker; the hand-off costs the same for every approach). Each round runs one block of
``--block`` checkpoints (forward of all, one backward of their sum) per approach, in rotated order;
the figure is the median over rounds of (block time / block), and "added" is the median of the
per-round differences with ``no fix`` (paired, so both see the same load), with its interquartile
range as the noise.

Then, because a few microseconds are below the end-to-end noise of a shared machine, each approach's
two pieces are timed alone with many repetitions: what it adds when the frame is built (forward) and
when the recompute runs (backward), each against the same call without the approach.

Finally a check (not timed) that the recompute on the worker thread sees what the forward set: the
three named settings, one other config setting (``torch._dynamo.config.automatic_dynamic_shapes``)
and a user ContextVar. "Carries every setting" means all five.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import os
import queue
import statistics
import sys
import threading
import time
import timeit
from typing import Any, Callable, Iterator

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._dynamo.utils  # noqa: E402
import torch.utils.checkpoint as ckpt  # noqa: E402
import torchfix_core  # noqa: E402

APPROACHES = ("no fix", "torchfix", "prime-rl #3951", "pytorch #186583")
USER_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("benchmark_user_var", default="default")
HAS_ENGINE_CONTEXT = hasattr(torch._C, "_get_obj_in_tls") and hasattr(torch._C, "_is_key_in_tls")


# ---------------------------------------------------------------------------------------------
# prime-rl #3951, as a baseline: three named settings re-entered with config.patch (SAC callers)


def prime_rl_context_fn(inner: Callable[[], tuple[Any, Any]]) -> Callable[[], tuple[Any, Any]]:
    dynamo_config = torch._dynamo.config
    compiler_config = torch.compiler.config

    def context_fn() -> tuple[Any, Any]:
        forward_ctx, recompute_ctx = inner()
        limit = dynamo_config.recompile_limit
        scalars = dynamo_config.capture_scalar_outputs
        sources = compiler_config.dynamic_sources

        @contextlib.contextmanager
        def recompute() -> Iterator[None]:
            with dynamo_config.patch(recompile_limit=limit, capture_scalar_outputs=scalars):
                with compiler_config.patch(dynamic_sources=sources), recompute_ctx:
                    yield

        return forward_ctx, recompute()

    return context_fn


# ---------------------------------------------------------------------------------------------
# pytorch #186583, its Python expression: the recompute in a copy of the engine's stashed context


def pr186583_frame_init(original: Callable[..., None]) -> Callable[..., None]:
    is_key, get_obj = torch._C._is_key_in_tls, torch._C._get_obj_in_tls

    def __init__(self: Any, recompute_fn: Any, *rest: Any) -> None:
        def recompute(*args: Any) -> Any:
            if is_key("context"):
                ctx = get_obj("context")
                if ctx is not None:
                    return ctx.copy().run(recompute_fn, *args)
            return recompute_fn(*args)

        original(self, recompute, *rest)

    return __init__


class Approach:
    """Switch one approach on (``enter``) and off (``leave``); ``context_fn`` for ``checkpoint``."""

    def __init__(self, name: str, sac: bool) -> None:
        self.name = name
        base: Callable[[], tuple[Any, Any]] = ckpt.noop_context_fn
        if sac:
            base = functools.partial(ckpt.create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
        self.context_fn = prime_rl_context_fn(base) if name == "prime-rl #3951" else base
        self._original_init = ckpt._CheckpointFrame.__dict__["__init__"]

    def enter(self) -> None:
        if self.name == "torchfix":
            torchfix_core.apply(only=["sac-replay"])
        elif self.name == "pytorch #186583":
            ckpt._CheckpointFrame.__init__ = pr186583_frame_init(self._original_init)  # type: ignore[method-assign]

    def leave(self) -> None:
        if self.name == "torchfix":
            torchfix_core.revert(only=["sac-replay"])
        elif self.name == "pytorch #186583":
            ckpt._CheckpointFrame.__init__ = self._original_init  # type: ignore[method-assign]


class Worker:
    """A persistent thread that runs the backward passes handed to it."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self.done: queue.Queue[BaseException | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="backward-worker", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                job()
                self.done.put(None)
            except BaseException as exc:  # noqa: BLE001
                self.done.put(exc)

    def run(self, job: Callable[[], Any]) -> None:
        self.jobs.put(job)
        exc = self.done.get()
        if exc is not None:
            raise exc


def fn(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


def block_us(approach: Approach, n: int, worker: Worker | None) -> float:
    """Wall time of n checkpoints forward and one backward of their sum, in us per checkpoint."""
    x = torch.randn(16, requires_grad=True)
    context_fn = approach.context_fn
    checkpoint = ckpt.checkpoint
    t0 = time.perf_counter()
    outs = [checkpoint(fn, x, use_reentrant=False, context_fn=context_fn) for _ in range(n)]
    loss = torch.stack(outs).sum()
    if worker is None:
        loss.backward()
    else:
        worker.run(loss.backward)
    return (time.perf_counter() - t0) / n * 1e6


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


def end_to_end(approaches: list[Approach], args: argparse.Namespace, worker: Worker | None) -> dict[str, Any]:
    samples: dict[str, list[float]] = {a.name: [] for a in approaches}
    for a in approaches:  # warm-up
        a.enter()
        block_us(a, args.block, worker)
        a.leave()
    for r in range(args.rounds):
        k = r % len(approaches)
        for a in approaches[k:] + approaches[:k]:
            a.enter()
            try:
                samples[a.name].append(block_us(a, args.block, worker))
            finally:
                a.leave()
    base = samples["no fix"]
    out: dict[str, Any] = {}
    for a in approaches:
        diffs = [s - b for s, b in zip(samples[a.name], base)]
        out[a.name] = (statistics.median(samples[a.name]), quartiles(diffs))
    return out


# ---------------------------------------------------------------------------------------------
# the two pieces alone: frame construction and the recompute call


def _added_ns(with_it: Callable[[], Any], without: Callable[[], Any], number: int, repeat: int) -> float:
    """ns per call that ``with_it`` adds to ``without``: interleaved repetitions (both see the same
    load), the minimum of each (the repetitions no other process interrupted), then the difference."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        a.append(timeit.timeit(with_it, number=number))
        b.append(timeit.timeit(without, number=number))
    return (min(a) - min(b)) / number * 1e9


def pieces(approach: Approach, number: int, repeat: int) -> tuple[float, float]:
    """(added at frame construction, added at recompute) in ns, against the same call without it."""
    if approach.name == "prime-rl #3951":
        number = max(20, number // 20)  # ~100 us a call: fewer calls per repetition, same duration
    frame_cls = ckpt._CheckpointFrame
    original_init = approach._original_init
    noop = ckpt.noop_context_fn

    def target(*args: Any) -> None:
        return None

    def make(init: Callable[..., None]) -> Callable[[], None]:
        def build() -> None:
            init(frame_cls.__new__(frame_cls), target, None, None, None)

        return build

    if approach.name == "torchfix":
        approach.enter()
        try:
            wrapped_init = frame_cls.__dict__["__init__"]
            frame = frame_cls.__new__(frame_cls)
            wrapped_init(frame, target, None, None, None)
            recompute = frame.recompute_fn
        finally:
            approach.leave()
        frame_ns = _added_ns(make(wrapped_init), make(original_init), number, repeat)
        call_ns = _added_ns(recompute, target, number, repeat)
        return frame_ns, call_ns
    if approach.name == "pytorch #186583":
        wrapped_init = pr186583_frame_init(original_init)
        frame = frame_cls.__new__(frame_cls)
        wrapped_init(frame, target, None, None, None)
        recompute = frame.recompute_fn
        frame_ns = _added_ns(make(wrapped_init), make(original_init), number, repeat)
        torch._C._stash_obj_in_tls("context", contextvars.copy_context())  # as _engine_run_backward does
        try:
            call_ns = _added_ns(recompute, target, number, repeat)
        finally:
            torch._C._remove_obj_from_tls("context")
        return frame_ns, call_ns
    if approach.name == "prime-rl #3951":
        wrapped = approach.context_fn
        frame_ns = _added_ns(wrapped, noop, number, repeat)

        def enter_exit() -> None:
            _, ctx = wrapped()
            with ctx:
                pass

        def enter_exit_plain() -> None:
            _, ctx = wrapped()

        call_ns = _added_ns(enter_exit, enter_exit_plain, number, repeat)
        return frame_ns, call_ns
    return 0.0, 0.0


def pieces_on(thread: str, approach: Approach, number: int, repeat: int) -> tuple[float, float]:
    if thread == "forward":
        return pieces(approach, number, repeat)
    box: dict[str, tuple[float, float]] = {}
    t = threading.Thread(target=lambda: box.update(r=pieces(approach, number, repeat)))
    t.start()
    t.join()
    return box["r"]


# ---------------------------------------------------------------------------------------------
# what each approach carries to the worker thread (not timed)


FORWARD_SETTINGS = {
    "recompile_limit": 64,
    "capture_scalar_outputs": True,
    "dynamic_sources": "L['n']",
    "automatic_dynamic_shapes": False,
    "user ContextVar": "forward",
}


def _read_settings() -> dict[str, Any]:
    return {
        "recompile_limit": torch._dynamo.config.recompile_limit,
        "capture_scalar_outputs": torch._dynamo.config.capture_scalar_outputs,
        "dynamic_sources": torch.compiler.config.dynamic_sources,
        "automatic_dynamic_shapes": torch._dynamo.config.automatic_dynamic_shapes,
        "user ContextVar": USER_VAR.get(),
    }


def carried(approach: Approach, worker: Worker | None) -> int:
    """How many of the five forward settings the recompute sees (backward on ``worker``)."""
    seen: list[dict[str, Any]] = []

    def probe(x: torch.Tensor) -> torch.Tensor:
        seen.append(_read_settings())
        return x.sin()

    approach.enter()
    try:
        # the forward thread's settings stay in force during backward (set for the whole step)
        with torch._dynamo.config.patch(
            recompile_limit=64, capture_scalar_outputs=True, automatic_dynamic_shapes=False
        ):
            with torch.compiler.config.patch(dynamic_sources="L['n']"):
                token = USER_VAR.set("forward")
                try:
                    x = torch.randn(16, requires_grad=True)
                    loss = ckpt.checkpoint(probe, x, use_reentrant=False, context_fn=approach.context_fn).sum()
                    if worker is None:
                        loss.backward()
                    else:
                        worker.run(loss.backward)
                finally:
                    USER_VAR.reset(token)
    finally:
        approach.leave()
    recompute = seen[-1]
    return sum(recompute[k] == v for k, v in FORWARD_SETTINGS.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41, help="rounds per cell (each runs every approach once)")
    parser.add_argument("--block", type=int, default=200, help="checkpoints per block")
    parser.add_argument("--reasons", type=int, default=10_000, help="graph-break reasons for the second column")
    parser.add_argument("--number", type=int, default=2_000, help="calls per repetition when timing the pieces")
    parser.add_argument("--repeat", type=int, default=101, help="repetitions when timing the pieces")
    parser.add_argument("--sac", action="store_true", help="a selective policy (save mm) for every approach")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torchfix_core.revert()  # every fix off; the torchfix approach applies sac-replay alone
    torchfix_core.apply(only=["sac-replay"])
    state = next((r.state for r in torchfix_core.status() if r.id == "sac-replay"), "absent")
    torchfix_core.revert(only=["sac-replay"])
    names = [n for n in APPROACHES if n != "torchfix" or state == "applied"]
    if not HAS_ENGINE_CONTEXT:
        names.remove("pytorch #186583")
    approaches = [Approach(n, args.sac) for n in names]
    worker = Worker()
    # the forward thread's own settings, as a training script sets them (per thread on 2.12+)
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.capture_scalar_outputs = True

    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    print(
        f"recompute_overhead: torch {torch.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; "
        f"sac-replay: {state}; policy: {'SAC (save mm)' if args.sac else 'none (plain checkpoint)'}"
    )
    print(f"{args.rounds} rounds x {len(approaches)} approaches x blocks of {args.block} checkpoints per cell")

    unimplemented = torch._dynamo.utils.counters["unimplemented"]
    table: dict[tuple[int, str], dict[str, Any]] = {}
    piece_table: dict[tuple[int, str], dict[str, tuple[float, float]]] = {}
    carry_table: dict[str, dict[str, int]] = {a.name: {} for a in approaches}
    for reasons in (0, args.reasons):
        unimplemented.clear()
        for i in range(reasons):
            unimplemented[f"Graph break (synthetic #{i}): call to unsupported function foo_{i} in module bar"] += 1
        for thread in ("forward", "worker"):
            w = worker if thread == "worker" else None
            table[(reasons, thread)] = end_to_end(approaches, args, w)
            piece_table[(reasons, thread)] = {
                a.name: pieces_on(thread, a, args.number, args.repeat) for a in approaches if a.name != "no fix"
            }
            if reasons == 0:
                for a in approaches:
                    carry_table[a.name][thread] = carried(a, w)
            print(f"  cell done: {reasons} reasons, backward on the {thread} thread", flush=True)
    unimplemented.clear()
    try:
        load = os.getloadavg()
    except OSError:
        pass
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")

    cells = [(0, "forward"), (0, "worker"), (args.reasons, "forward"), (args.reasons, "worker")]
    heads = [f"{r:,} reasons, {t} thread" for r, t in cells]
    print()
    print("End to end, us per checkpoint (forward + backward), median over rounds; added vs no fix: median [IQR]")
    print("| approach | " + " | ".join(heads) + " |")
    print("|---" * (len(cells) + 1) + "|")
    for a in approaches:
        row = []
        for cell in cells:
            median, (q1, dm, q3) = table[cell][a.name]
            row.append(f"{median:.1f}" if a.name == "no fix" else f"{median:.1f} ({dm:+.2f} [{q1:+.2f}, {q3:+.2f}])")
        print(f"| {a.name} | " + " | ".join(row) + " |")
    print()
    print(
        "The pieces alone, us added per checkpoint: frame construction + recompute call (minimum of "
        f"{args.repeat} interleaved repetitions of {args.number} calls, with minus without)"
    )
    print("| approach | " + " | ".join(heads) + " |")
    print("|---" * (len(cells) + 1) + "|")
    for a in approaches:
        if a.name == "no fix":
            continue
        row = []
        for cell in cells:
            frame_ns, call_ns = piece_table[cell][a.name]
            row.append(f"{(frame_ns + call_ns) / 1e3:.2f} = {frame_ns / 1e3:.2f} + {call_ns / 1e3:.2f}")
        print(f"| {a.name} | " + " | ".join(row) + " |")
    print()
    print(
        f"Settings the recompute sees, of the {len(FORWARD_SETTINGS)} the forward set ({', '.join(FORWARD_SETTINGS)}):"
    )
    print("| approach | forward thread | worker thread |")
    print("|---|---|---|")
    for a in approaches:
        row = carry_table[a.name]
        print(f"| {a.name} | {row['forward']}/{len(FORWARD_SETTINGS)} | {row['worker']}/{len(FORWARD_SETTINGS)} |")


if __name__ == "__main__":
    main()
