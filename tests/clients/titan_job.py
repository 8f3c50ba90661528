"""A short torchtitan training job built from torchtitan's own pieces, with torchfix active or not.

    torchrun --nproc-per-node 2 tests/clients/titan_job.py --device cuda --steps 20 --deterministic on
                                                                          (2 GPUs, NCCL)
    python tests/clients/titan_job.py --spawn 2 --device cpu --steps 6    (2 CPU ranks, gloo)
    python tests/clients/titan_job.py --ordering eager-ckpt --steps 8     (one rank, CPU)

torchfix is whatever the environment makes it: installed = active at ``import torch``;
``TORCHFIX_DISABLE=all`` = off. Rank 0 prints one JSON line (the last line of stdout): per-step
losses and gradient norms (also as ``float.hex``, to compare runs bit for bit), step times, peak
memory, the torchfix states and the error, if any.

``--ordering titan`` (default): torchtitan 0.3.0's Llama3 ``debugmodel`` (6 blocks, dim 256,
vocab 2048), ``parallelize_llama`` with its activation checkpointing (``SelectiveAC``), per-block
``torch.compile`` applied *over* the checkpoint wrapper, and FSDP2 over all ranks; its AdamW
(``default_adamw``), warm-up/decay LR schedule, ``CrossEntropyLoss`` and ``clip_grad_norm_``;
synthetic tokens (fixed seeds, one batch per rank and step).

``--ordering eager-ckpt``: the order frameworks such as prime-rl use: each torchtitan block is
compiled first (``block.compile(fullgraph=True, dynamic=False)`` as torchtitan's ``apply_compile``
does, plus ``dynamic=False``; ``backend=aot_eager``), then torchtitan's
``SelectiveAC`` wraps the compiled block in an eager checkpoint. The training thread raises
``recompile_limit`` to 64; the sequence length changes every step; a block-level flag that the
compiled code reads flips between forward and backward (an emulation, said so in the output, of a
framework's training-state flag: it makes the recompute miss the forward's cache entry); backward
runs on a worker thread (on CPU a ``threading.Thread``, the stand-in for CUDA's autograd worker). Once a
block's code object holds 8 entries, the recompute on that thread runs under torch's default limit
(torch >= 2.12 keeps Dynamo's config per thread) and falls back to eager under SAC: the sac-replay bug.

Glue, never patches to torchtitan (torchtitan 0.3.0 on torch 2.13):

* ``spmd_backend="partial_dtensor"``: the default (``spmd_types``) needs FSDP support from torch 2.14;
* attention: ``ScaledDotProductAttention`` (causal) instead of FlexAttention, which has no CPU
  backward on torch 2.13 (the model is called without attention masks);
* gloo has no ``PREMUL_SUM`` reduce, which FSDP's gradient divide factor uses: on gloo the FSDP
  modules are set to ``set_force_sum_reduction_for_comms(True)`` (plain SUM, then FSDP's own divide);
* torchtitan's device detection (``tools/utils.py``) falls back to ``"cuda"`` without an
  accelerator: on CPU the glue sets the ``device_type`` name that ``distributed/parallel_dims.py``
  imported from it to ``"cpu"`` before the mesh is built (no torchtitan source is changed);
* ``torchtitan.trainer`` is not imported (it pulls torchdata, tokenizers, tensorboard): this script
  is the training loop, written after ``Trainer.train_step``.

Determinism (the on/off comparison is bit for bit, so nothing but torchfix may differ between two
runs): every rank uses a fixed number of intra-op threads (``--threads``, default 1 on the CPU: set
as ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` before torch is imported, so threads that torch starts
later, such as the backward worker, get it too, and with ``torch.set_num_threads``), and
``torch.use_deterministic_algorithms(True)`` (``--deterministic``, default on for the CPU; it also
fills uninitialized memory with NaN, so a kernel that reads it cannot differ run to run). The caller
gives each run its own empty ``TORCHINDUCTOR_CACHE_DIR`` so both compile cold. The report records
the thread counts seen on the training and backward threads.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

SEQ_LENS = (32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120)


def _states() -> dict[str, str]:
    try:
        import torchfix_core
    except ImportError:
        return {}
    return {r.id: str(getattr(r.state, "value", r.state)) for r in torchfix_core.status()}


def _determinism(args: argparse.Namespace) -> dict[str, Any]:
    """Fix the intra-op thread count and turn on deterministic algorithms (before any model code)."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    deterministic = args.deterministic == "on" or (args.deterministic == "auto" and args.device == "cpu")
    if deterministic:
        torch.use_deterministic_algorithms(True)
    return {"intra_op_threads": torch.get_num_threads(), "deterministic": torch.are_deterministic_algorithms_enabled()}


def _model(device: Any, *, attention: str) -> Any:
    import torch
    from torchtitan.models.common.attention import ScaledDotProductAttention
    from torchtitan.models.llama3 import model_registry

    spec = model_registry("debugmodel")
    config = spec.model
    if attention == "sdpa":
        for layer in config.layers:
            layer.attention.inner_attention = ScaledDotProductAttention.Config()
    with torch.device("meta"):
        model = config.build()
    return spec, model


def _init(model: Any, device: Any, seed: int) -> None:
    import torch

    model.to_empty(device=device)
    torch.manual_seed(seed)
    with torch.no_grad():
        model.init_weights(buffer_device=None)
    model.train()


def _gloo_sum_reduction(model: Any) -> None:
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_force_sum_reduction_for_comms(True)


def _peak_memory(device: Any) -> dict[str, float]:
    import resource

    import torch

    out = {"max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.type == "cuda":
        out["cuda_max_allocated_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        out["cuda_max_reserved_mib"] = torch.cuda.max_memory_reserved(device) / 2**20
    return out


def run_titan(args: argparse.Namespace) -> dict[str, Any]:
    """torchtitan's ordering: AC wrapper, compile over it, FSDP2; 2+ ranks."""
    import torch
    import torch.distributed as dist
    from torchtitan.components.loss import CrossEntropyLoss
    from torchtitan.components.optimizer import LRSchedulersContainer, default_adamw
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.models.llama3.parallelize import parallelize_llama

    rank, world = dist.get_rank(), dist.get_world_size()
    device = (
        torch.device(args.device, int(os.environ.get("LOCAL_RANK", 0)))
        if args.device == "cuda"
        else torch.device("cpu")
    )
    precision = "bfloat16" if args.device == "cuda" else "float32"
    training = TrainingConfig(local_batch_size=args.batch, seq_len=args.seq, steps=args.steps)
    training.mixed_precision_param = precision
    parallelism = ParallelismConfig(spmd_backend="partial_dtensor", data_parallel_shard_degree=world)
    if device.type == "cpu":
        import torchtitan.distributed.parallel_dims as titan_dims

        titan_dims.device_type = "cpu"  # its device detection falls back to "cuda", never to the CPU
    dims = ParallelDims.from_config(parallelism, world)
    dims.build_mesh()
    spec, model = _model(device, attention=args.attention)
    ac = SelectiveAC.Config() if args.ac == "selective" else FullAC.Config()
    compile_config = CompileConfig(enable=args.compile, components=["model"])
    model = parallelize_llama(
        model,
        parallel_dims=dims,
        training=training,
        parallelism=parallelism,
        compile_config=compile_config,
        ac_config=ac,
        dump_folder=args.scratch,
    )
    if dist.get_backend() == "gloo":
        _gloo_sum_reduction(model)
    _init(model, device, seed=0)
    optimizers = default_adamw(lr=8e-4).build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=2, decay_ratio=0.8).build(
        optimizers=optimizers, training_steps=args.steps
    )
    loss_fn = CrossEntropyLoss.Config(global_vocab_size=spec.model.vocab_size).build()
    vocab = spec.model.vocab_size
    gen = torch.Generator().manual_seed(1234 + rank)
    losses, norms, times = [], [], []
    error = None
    for step in range(args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), generator=gen).to(device)
        inputs, labels = tokens[:, :-1], tokens[:, 1:]
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        try:
            optimizers.zero_grad()
            local_tokens = torch.tensor(labels.numel(), device=device)
            global_tokens = dist_utils.dist_sum_tensor(local_tokens, dims.get_mesh("batch"))
            pred = model(inputs)
            loss, _ = loss_fn(pred, labels, global_tokens)
            del pred
            loss.backward()
            norm = dist_utils.clip_grad_norm_(list(model.parameters()), 1.0, foreach=True)
            optimizers.step()
            schedulers.step()
            total = loss.detach().clone()
            dist.all_reduce(total)
        except Exception as exc:  # noqa: BLE001 - reported, not hidden: the caller asserts on it
            error = f"step {step}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            break
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
        losses.append(float(total))
        norms.append(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))
    return {
        "rank": rank,
        "world": world,
        "backend": dist.get_backend(),
        "device": str(device),
        "precision": precision,
        "losses": losses,
        "losses_hex": [x.hex() for x in losses],
        "grad_norms_hex": [x.hex() for x in norms],
        "step_s": times,
        "median_step_s": statistics.median(times[2:]) if len(times) > 2 else None,
        "peak": _peak_memory(device),
        "error": error,
    }


class _Phase:
    """A framework's training-state flag read by the compiled code (the emulated guard miss)."""

    value = 0


def backward_on_worker(loss: Any, threads: set[int]) -> None:
    """``loss.backward()`` on a worker ``threading.Thread`` (a fresh contextvars context: torch >= 2.12
    reads Dynamo's config defaults there, as CUDA's autograd device thread does), its error re-raised
    on this thread; ``threads`` collects the worker's intra-op thread count."""
    import torch

    box: dict[str, BaseException] = {}

    def target() -> None:
        threads.add(torch.get_num_threads())
        try:
            loss.backward()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the training thread
            box["exc"] = exc

    worker = threading.Thread(target=target, name="backward-worker")
    worker.start()
    worker.join()
    if "exc" in box:
        raise box["exc"]


def run_eager_ckpt(args: argparse.Namespace) -> dict[str, Any]:
    """prime-rl's ordering: compile each torchtitan block, then wrap it in torchtitan's SelectiveAC."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters
    from torchtitan.distributed.activation_checkpoint import SelectiveAC

    device = torch.device(args.device)
    # this (training) thread only on torch >= 2.12; a limit below 8 (--recompile-limit) makes the
    # *forward* hit it first: the same error outside a recompute (the corpus's control)
    torch._dynamo.config.recompile_limit = args.recompile_limit
    spec, model = _model(device, attention=args.attention)
    phase = _Phase()
    for block in model.layers.values():
        original = block.forward

        def forward(*a: Any, _original: Any = original, **kw: Any) -> Any:
            scale = 1.0 if phase.value == 0 else 1.0  # same math; the guard on phase.value misses after a flip
            return _original(*a, **kw) * scale

        block.forward = forward
    for block in model.layers.values():  # dynamic=False: one entry per sequence length
        block.compile(backend=args.backend, fullgraph=True, dynamic=False)
    SelectiveAC(SelectiveAC.Config()).apply(model)
    _init(model, device, seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=8e-4)
    gen = torch.Generator().manual_seed(1234)
    losses, norms, error = [], [], None
    backward_threads: set[int] = set()

    def backward(loss: torch.Tensor) -> None:
        if device.type == "cuda":
            loss.backward()  # the engine's worker thread runs the recompute
            return
        backward_on_worker(loss, backward_threads)

    for step in range(args.steps):
        seq = SEQ_LENS[step % len(SEQ_LENS)]
        tokens = torch.randint(0, spec.model.vocab_size, (args.batch, seq + 1), generator=gen).to(device)
        phase.value = 0
        try:
            pred = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), tokens[:, 1:].flatten())
            phase.value = 1
            backward(loss)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
        except Exception as exc:  # noqa: BLE001 - reported: the caller asserts on it
            if args.raise_errors:  # uncaught: the form a user's log has (tests/clients/test_client_corpus.py)
                raise
            error = f"step {step}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            break
        losses.append(float(loss))
        norms.append(float(norm))
    unimpl = counters.get("unimplemented") or {}
    return {
        "rank": 0,
        "ordering": "eager-ckpt",
        "emulated_guard_miss": True,
        "losses": losses,
        "losses_hex": [x.hex() for x in losses],
        "grad_norms_hex": [x.hex() for x in norms],
        "backward_thread_intra_op_threads": sorted(backward_threads),
        "recompile_limit_hits": int(sum(v for k, v in unimpl.items() if "recompile limit" in str(k).lower())),
        "error": error,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(args: argparse.Namespace, argv: list[str], script: str = __file__) -> int:
    """``--spawn N``: start N ranks of ``script`` (default: this one; gloo, loopback rendezvous) with
    ``argv`` less ``--spawn N``, relay rank 0's report; ``args.timeout`` bounds the wait."""
    port = str(_free_port())
    at = argv.index("--spawn")
    child_args = argv[:at] + argv[at + 2 :]
    procs = []
    for rank in range(args.spawn):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.spawn))
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(
            subprocess.Popen(
                [sys.executable, os.path.abspath(script), *child_args], env=env, text=True, stdout=subprocess.PIPE
            )
        )
    outputs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    sys.stdout.write(outputs[0])
    return max(p.returncode for p in procs)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ordering", choices=["titan", "eager-ckpt"], default="titan")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--ac", choices=["selective", "full"], default="selective")
    parser.add_argument("--attention", choices=["sdpa"], default="sdpa", help="FlexAttention needs masks and CUDA")
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument(
        "--recompile-limit", type=int, default=64, help="eager-ckpt ordering: the training thread's recompile_limit"
    )
    parser.add_argument("--backend", default="aot_eager", help="eager-ckpt ordering's compile backend")
    parser.add_argument("--spawn", type=int, default=0, help="start this many gloo ranks (CPU)")
    parser.add_argument("--timeout", type=float, default=1500)
    parser.add_argument("--scratch", default=tempfile.gettempdir())
    parser.add_argument("--raise", dest="raise_errors", action="store_true", help="let a failed step's error propagate")
    parser.add_argument(
        "--threads", type=int, default=None, help="intra-op threads per rank (default: 1 on cpu, torch's on cuda)"
    )
    parser.add_argument(
        "--deterministic",
        choices=["auto", "on", "off"],
        default="auto",
        help="torch.use_deterministic_algorithms (auto: on for cpu)",
    )
    args = parser.parse_args(argv)
    if args.threads is None and args.device == "cpu":
        args.threads = 1
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if args.threads:  # before torch is imported: OpenMP/MKL read these for every thread they start
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    if args.deterministic == "on" and args.device == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's deterministic workspace
    if args.spawn:
        return spawn(args, argv)
    from torch.distributed.elastic.multiprocessing.errors import record

    # record: under torchrun an uncaught error (--raise) is also written to torchelastic's error file
    return int(record(_run)(args))


def _run(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    settings = _determinism(args)

    if args.ordering == "eager-ckpt":
        report = run_eager_ckpt(args)
    else:
        backend = "nccl" if args.device == "cuda" else "gloo"
        if args.device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
        try:
            report = run_titan(args)
        finally:
            dist.destroy_process_group()
    return emit(report, settings)


def emit(report: dict[str, Any], settings: dict[str, Any]) -> int:
    """Complete a rank's report (settings, torch version, torchfix states, TORCHFIX_DISABLE) and
    print it as the last stdout line on rank 0 (the JSON the kit's runner reads); returns 0."""
    import torch

    report.update(settings, torch=torch.__version__, torchfix=_states(), disable=os.environ.get("TORCHFIX_DISABLE", ""))
    if report["rank"] == 0:
        sys.stdout.write(json.dumps(report) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
