"""A short Hugging Face transformers training job under FSDP2 mixed precision, with torchfix active or not.

    python tests/clients/hf_job.py --spawn 2 --steps 4                       (2 CPU ranks, gloo)
    python tests/clients/hf_job.py --spawn 2 --steps 4 --embedding shared   (stock placement)
    python tests/clients/hf_job.py --spawn 2 --steps 4 --compile            (per-layer torch.compile)
    python tests/clients/hf_job.py --spawn 2 --steps 4 --no-checkpointing   (the reference losses)
    python tests/clients/hf_job.py --spawn 2 --model qwen3 --attn eager --embedding root --root-policy none
    torchrun --nproc-per-node 2 tests/clients/hf_job.py --raise            (torchrun's own output, error.json)
    python tests/clients/hf_job.py --spawn 1 --steps 8 --no-fsdp --compile --backend aot_eager --fullgraph \
        --recompile-limit 64 --vary-seq --phase-flag --backward-thread   (sac-replay's ordering, below)
    python tests/clients/hf_job.py --spawn 1 --model mamba2 --no-fsdp --compile --backend aot_eager --pair
                                                                    (recompute-cache's ordering, below)
    python tests/clients/hf_job.py --spawn 2 --embedding shared --shard-child self_attn --pair
                                                                    (fsdp-recompute-unshard's, below)
    python tests/clients/hf_job.py --spawn 1 --no-fsdp --compile --sac  (SAC saving compiled regions, below)

torchfix is whatever the environment makes it: installed = active at ``import torch``;
``TORCHFIX_DISABLE=all`` = off. Rank 0 prints one JSON line (the last line of stdout): per-step
losses and gradient norms (also as ``float.hex``, to compare runs bit for bit), step times, peak
memory per step, the torchfix states, transformers' version and where its checkpoint sits, and the
error of the first failed step, if any.

The model is transformers' own ``LlamaForCausalLM`` (or ``Qwen2ForCausalLM`` / ``Qwen3ForCausalLM``,
``Qwen3MoeForCausalLM``, ``Mamba2ForCausalLM``, ``BambaForCausalLM``: ``--model``), random-initialised
from a small config (``--layers`` decoder layers, hidden 64, 4 heads, 2 KV heads, vocab 256; Qwen3-MoE:
4 experts of 32, 2 per token, every layer sparse; Mamba2 / Bamba: 4 SSM heads of 32, state 16, chunk
16, Bamba's second layer attention; ``--attn sdpa`` (default) or ``eager`` attention; no weights are
downloaded),
``model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})``, then
FSDP2: ``fully_shard`` on each decoder layer and then on the root, with
``MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)`` (``--output-fp32``
adds ``output_dtype=torch.float32``, as accelerate's FSDP2 plugin lets a user set; ``--root-policy
none`` shards the root without a policy); ``torch.optim.AdamW``; synthetic tokens (fixed seeds, one
batch per rank and step); the loss is transformers' own (``labels=`` to the model).

Where the fp32 comes from (``--embedding``):

* ``fp32`` (default): the token embedding is a ``fully_shard`` unit of its own, kept in float32
  (``MixedPrecisionPolicy(param_dtype=None)``: it computes in the stored dtype), as stacks that keep
  embeddings in full precision do. The hidden states and the rotary ``cos``/``sin`` (computed in the
  dtype of the hidden states) reach every decoder layer as float32; FSDP2 casts them to bfloat16 in
  the forward, but transformers <= 5.22 checkpoints the layer's ``__call__``, so the checkpoint saves
  the float32 inputs *before* FSDP's pre-forward hook, and the recompute in backward calls that hook
  again in ``TrainingState.PRE_BACKWARD``, where torch 2.8-2.12 return the inputs uncast: the layer
  recomputes float32 activations against bfloat16 parameters (pytorch #159359, fixed in 2.13.0 by
  #182580). torchfix's ``fsdp-recompute-cast`` applies the cast there.
* ``shared``: the embedding is in the root's bfloat16 unit (the brief's placement, nothing else
  sharded): every layer input is already bfloat16, so the recompute has nothing to cast and no torch
  release fails (recorded as the control).
  With ``--root-policy none`` (the root keeps float32 parameters, as a user who shards the root
  without a policy has it) the hidden states reach the first layer as float32 again: the bug.
* with ``--output-fp32`` every layer hands the next one float32 outputs, whatever the placement.

A checkpoint *around* compiled layers (the sac-replay bug, ``docs/fixes/sac-replay.md``): transformers'
``GradientCheckpointingLayer`` checkpoints the layer's ``__call__``, and ``--compile`` compiles the
layer's ``_call_impl`` (``nn.Module.compile``), so each compiled layer runs inside transformers' own
non-reentrant checkpoint, the order that ``titan_job.py --ordering eager-ckpt`` builds from torchtitan's
pieces. The options that complete it, as titan_job's emulation does:

* ``--no-fsdp``: no ``fully_shard`` (FSDP's hooks inside a ``fullgraph`` compile are not what this
  shows): every rank trains its own float32 replica; the process group is still set up (the loss is
  all-reduced), so the job runs the same under ``torchrun``;
* ``--fullgraph``: ``layer.compile(fullgraph=True, dynamic=False)``: one cache entry per sequence
  length, and a recompile past the limit is an error instead of an eager fallback;
* ``--recompile-limit N``: the training thread sets ``torch._dynamo.config.recompile_limit = N``
  (per thread since torch 2.12);
* ``--vary-seq``: the sequence length changes every step (titan_job's ``SEQ_LENS``), so every step
  compiles new entries;
* ``--phase-flag``: each decoder layer's ``forward`` reads a flag that flips from 0 in the forward to
  1 before the backward (an emulation, said so in the JSON, of a framework's training-state flag:
  the same math, but the recompute misses the forward's cache entry on the guard);
* ``--backward-thread``: ``loss.backward()`` runs on a ``threading.Thread`` (on the CPU the stand-in
  for CUDA's autograd device thread, where the recompute runs), its error re-raised on the training
  thread.

With all of them and ``--recompile-limit 64``, each step adds two entries per layer (the forward's
and the recompute's); once a layer holds 8, the recompute, which on torch >= 2.12 reads the default
limit (8) on the backward's thread, fails with ``FailOnRecompileLimitHit`` inside
``torch.utils.checkpoint``'s ``recompute_fn``; with ``sac-replay`` on it reads the forward's 64 and
trains. ``--recompile-limit 4`` makes the *forward* hit the limit first: the same error outside a
recompute (the explain corpus's control).

A checkpoint around compiled layers whose Dynamo cache holds two graphs for one input (the
recompute-cache bug, ``docs/fixes/recompute-cache.md``): ``--no-fsdp --compile --pair`` compiles each
decoder layer (``nn.Module.compile``, automatic dynamic shapes) inside transformers' own non-reentrant
checkpoint, and each step runs two forwards before one backward (``--pair``: a paired objective, such
as chosen / rejected or query / document, sequences of ``--seq`` and ``--seq`` + 16 tokens, the two
losses summed). The second forward recompiles each layer's code as a dynamic graph, which Dynamo's
LRU puts first; the backward recomputes the first forward's layers with that graph, where the forward
ran the static one. Mamba2's chunked scan (Mamba2, and Bamba's Mamba2 mixers) saves other tensors in
the two graphs, so the checkpoint raises ``CheckpointError`` ("different metadata"); Llama's and
Qwen3's layers save the same tensors in both graphs, so they run the other graph without an error.
``--switch-attn-before-backward`` (Bamba, not compiled) sets the model's attention implementation to
``eager`` between the forward and the backward: the recompute of the attention layer saves other
tensors than its SDPA forward, the same error from eager code (the explain corpus's control).

A ``fully_shard`` unit nested inside a checkpointed decoder layer, two forwards before one backward (the
fsdp-recompute-unshard bug, ``docs/fixes/fsdp-recompute-unshard.md``): ``--shard-child NAME`` (repeatable)
shards that submodule of each decoder layer (``self_attn``, ``mlp``, ``mlp.experts``) as a unit of its own
before the layer's unit, with the same policy; ``--pair`` runs two forwards before one backward (above).
The backward of the second forward ends with the child's post-backward, which reshards it and leaves its
state in ``PRE_BACKWARD``; the recompute of the first forward's layer then calls the child's pre-forward,
which on torch 2.8-2.10 returns at once, assuming the pre-backward hook unsharded it. For ``self_attn``
that hook has not run yet (the recompute starts in the backward of the mlp, after the attention), so the
attention's projections meet their sharded DTensor weights: ``RuntimeError: aten.mm.default got mixed
torch.Tensor and DTensor ...``. A child that is the layer's last module (``mlp``, ``mlp.experts``) has its
pre-backward hook run before the recompute reaches it, and is not hit. ``--embed-outside`` computes
``inputs_embeds`` with ``model.get_input_embeddings()`` before calling the model (as multimodal and
prompt-tuning code does): with ``--embedding shared`` that embedding belongs to the root's unit, whose
parameters are sharded DTensors outside its forward, so the same message comes from the forward (an
ordinary misuse; the explain corpus's control). ``unshard_counts`` reports fsdp-recompute-unshard's tallies.

Selective activation checkpointing around compiled layers (the sac-storage-key bug,
``docs/fixes/sac-storage-key.md``): ``--sac`` passes a ``context_fn`` (``create_selective_checkpoint_contexts``)
to ``gradient_checkpointing_enable`` whose policy saves every ``inductor_compiled_code`` region and
recomputes the rest, and sets ``torch._inductor.config.wrap_inductor_compiled_regions = True``, so each
region compiled by Inductor (``--compile``'s layers, flex attention) reaches SAC as one op.
``storage_key_counts`` reports sac-storage-key's tallies (``keyed-region-queue``: regions dispatched through
SAC's modes). Measured on torch 2.12.0 with transformers 5.22.2 (Llama; Mamba2 with ``--pair``): one region
per layer call in the forward and again in the recompute, no region skipped, losses bit-identical with the
fix on and off: not hit (transformers builds masks and rotary embeddings outside the checkpointed layers).
``--attn flex_attention`` cannot train on a CPU (FlexAttention has no CPU backward).

A failure is reported in the JSON (``error``, ``error_detail``, and the rank's ``error_traceback`` as
Python prints it); ``--raise`` lets it propagate instead (uncaught: the interpreter's, ``torchrun``'s
``[rankN]:`` and torchelastic's ``error.json`` forms, through ``torch.distributed.elastic``'s
``record``), which is how the explain corpus (tests/clients/test_client_corpus.py) gets its inputs.

Determinism (the on/off comparison is bit for bit): one intra-op thread per rank (set before torch is
imported, and ``torch.set_num_threads``), ``torch.use_deterministic_algorithms(True)``; the caller
gives each run its own empty ``TORCHINDUCTOR_CACHE_DIR``. Peak memory is the resident set size high
water mark (``ru_maxrss``) after each step, per rank: ``tracemalloc`` sees only Python's allocator,
not torch's CPU tensors. gloo has no ``PREMUL_SUM``: the FSDP modules use
``set_force_sum_reduction_for_comms(True)`` (as titan_job.py does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from titan_job import SEQ_LENS, _determinism, _gloo_sum_reduction, _Phase, backward_on_worker, emit, spawn

VOCAB = 256
FIX = "fsdp-recompute-cast"
#: --shard-child with --pair: the nested-unit recompute bug (its tallies are reported as unshard_counts)
UNSHARD_FIX = "fsdp-recompute-unshard"
#: --sac: SAC's per-region storage key (its tallies are reported as storage_key_counts)
STORAGE_KEY_FIX = "sac-storage-key"
#: --model: (config class, model class) of transformers
MODELS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM"),
    "bamba": ("BambaConfig", "BambaForCausalLM"),
}
#: --pair: the second forward's sequence is this much longer (a multiple of the SSM chunk size, 16)
PAIR_EXTRA = 16
#: Mamba2's SSM mixer (Mamba2, and Bamba's mamba layers): heads of 32, chunked scan of 16 tokens
SSM = {"heads": 4, "head_dim": 32, "state": 16, "chunk": 16, "groups": 1, "expand": 2}


def _config(args: argparse.Namespace) -> Any:
    import transformers

    common = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        attn_implementation=args.attn,
        use_cache=False,
    )
    if args.model in ("qwen3", "qwen3_moe"):
        common["head_dim"] = 16
    if args.model == "qwen3_moe":  # 4 experts of 32, 2 per token, every layer sparse
        common.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1)
    if args.model == "mamba2":
        return transformers.Mamba2Config(
            vocab_size=VOCAB,
            hidden_size=64,
            num_hidden_layers=args.layers,
            num_heads=SSM["heads"],
            head_dim=SSM["head_dim"],
            state_size=SSM["state"],
            chunk_size=SSM["chunk"],
            n_groups=SSM["groups"],
            expand=SSM["expand"],
            tie_word_embeddings=False,
            use_cache=False,
        )
    if args.model == "bamba":
        common.update(
            attn_layer_indices=[i for i in range(args.layers) if i % 2 == 1],
            mamba_n_heads=SSM["heads"],
            mamba_d_head=SSM["head_dim"],
            mamba_d_state=SSM["state"],
            mamba_chunk_size=SSM["chunk"],
            mamba_n_groups=SSM["groups"],
            mamba_expand=SSM["expand"],
        )
    return getattr(transformers, MODELS[args.model][0])(**common)


def _layers(model: Any) -> Any:
    """The decoder layers (transformers' ``GradientCheckpointingLayer`` modules): ``model.model.layers``, or
    ``model.backbone.layers`` for Mamba2."""
    return model.backbone.layers if hasattr(model, "backbone") else model.model.layers


def _model(args: argparse.Namespace) -> Any:
    import torch
    import transformers

    torch.manual_seed(0)
    model = getattr(transformers, MODELS[args.model][1])(_config(args))
    if args.checkpointing:
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if args.sac:
            kwargs["context_fn"] = _sac_context_fn()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.train()
    return model


def _sac_context_fn() -> Any:
    """``--sac``: selective activation checkpointing whose policy saves every Inductor-compiled region
    (``inductor_compiled_code``, the usual choice for compiled flex attention) and recomputes the rest;
    Inductor wraps its compiled regions in that op (``wrap_inductor_compiled_regions``), so SAC sees them."""
    import functools

    import torch
    import torch._inductor.config
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    torch._inductor.config.wrap_inductor_compiled_regions = True
    region = getattr(torch.ops.higher_order, "inductor_compiled_code", None)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE if func is region else CheckpointPolicy.PREFER_RECOMPUTE

    return functools.partial(create_selective_checkpoint_contexts, policy)


def _checkpoints_call() -> bool:
    """Whether transformers' GradientCheckpointingLayer checkpoints ``__call__`` (FSDP's hooks inside
    the checkpoint: <= 5.22) rather than ``forward`` (hooks outside: >= 5.23)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return "__call__" in GradientCheckpointingLayer.__dict__


def _phase_flag(model: Any) -> _Phase:
    """``--phase-flag``: each decoder layer's ``forward`` reads a flag (the emulated training-state flag);
    the caller flips it between forward and backward, so the recompute misses the forward's entry."""
    phase = _Phase()
    for layer in _layers(model):
        original = layer.forward

        def forward(*a: Any, _original: Any = original, **kw: Any) -> Any:
            scale = 1.0 if phase.value == 0 else 1.0  # same math; the guard on phase.value misses after a flip
            return _original(*a, **kw) * scale

        layer.forward = forward
    return phase


def _compile(layer: Any, args: argparse.Namespace) -> None:
    if args.fullgraph:  # dynamic=False: one entry per sequence length
        layer.compile(backend=args.backend, fullgraph=True, dynamic=False)
    else:
        layer.compile(backend=args.backend)


def _shard(model: Any, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    output = torch.float32 if args.output_fp32 else None
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=output)
    if args.embedding == "fp32":
        fp32 = MixedPrecisionPolicy(param_dtype=None, reduce_dtype=torch.float32)
        fully_shard(model.model.embed_tokens, mesh=mesh, mp_policy=fp32)
    for layer in model.model.layers:
        if args.compile:
            _compile(layer, args)
        for child in args.shard_child:  # a unit inside the checkpointed layer (nested fully_shard)
            fully_shard(layer.get_submodule(child), mesh=mesh, mp_policy=mp)
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    if args.root_policy == "none":
        fully_shard(model, mesh=mesh)
    else:
        fully_shard(model, mesh=mesh, mp_policy=mp)
    _gloo_sum_reduction(model)


def _rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def _counts(fix: str = FIX) -> dict[str, int]:
    """A fix's tallies in this process (what ``torchfix_core.report()`` shows), {} without it."""
    try:
        from torchfix_core.tallies import tallies
    except ImportError:
        return {}
    found = tallies().get(fix)
    return dict(found.counts) if found is not None else {}


def _backward(loss: Any, args: argparse.Namespace, threads: set[int]) -> None:
    """``loss.backward()``, with ``--backward-thread`` on a worker thread (titan_job's), its error
    re-raised here."""
    if args.backward_thread:
        backward_on_worker(loss, threads)
    else:
        loss.backward()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import traceback

    import torch
    import torch.distributed as dist
    import transformers

    rank, world = dist.get_rank(), dist.get_world_size()
    if args.recompile_limit is not None:  # this (training) thread only on torch >= 2.12
        import torch._dynamo

        torch._dynamo.config.recompile_limit = args.recompile_limit
    model = _model(args)
    phase = _phase_flag(model) if args.phase_flag else _Phase()
    if args.fsdp:
        _shard(model, args)
    elif args.compile:
        for layer in _layers(model):
            _compile(layer, args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1234 + rank)
    losses: list[float] = []
    norms: list[float] = []
    times: list[float] = []
    rss: list[float] = []
    backward_threads: set[int] = set()
    error = error_detail = error_traceback = None
    for step in range(args.steps):
        seq = SEQ_LENS[step % len(SEQ_LENS)] if args.vary_seq else args.seq
        tokens = torch.randint(0, VOCAB, (args.batch, seq + 1), generator=gen)
        # --pair: a second sequence of the pair, PAIR_EXTRA tokens longer, forward before the backward
        paired = torch.randint(0, VOCAB, (args.batch, seq + PAIR_EXTRA + 1), generator=gen) if args.pair else None
        t0 = time.perf_counter()
        phase.value = 0
        try:
            if args.embed_outside:  # the control: the root's embedding called outside its FSDP unit
                out = model(inputs_embeds=model.get_input_embeddings()(tokens[:, :-1]), labels=tokens[:, 1:])
            else:
                out = model(input_ids=tokens[:, :-1], labels=tokens[:, 1:])
            loss = out.loss
            if paired is not None:
                loss = loss + model(input_ids=paired[:, :-1], labels=paired[:, 1:]).loss
            if args.phase_flag:
                phase.value = 1
            if args.switch_attn_before_backward:  # the control: the model changes before its recompute
                model.set_attn_implementation("eager")
            _backward(loss, args, backward_threads)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            total = loss.detach().float().clone()
            dist.all_reduce(total)
        except Exception as exc:  # noqa: BLE001 - reported, not hidden: the caller asserts on it
            if args.raise_errors:
                raise
            error = f"step {step}: {type(exc).__name__}: {_first_line(exc)}"
            error_traceback = traceback.format_exc()
            error_detail = str(exc)[:2000]
            break
        times.append(time.perf_counter() - t0)
        losses.append(float(total) / world)
        norms.append(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))
        rss.append(_rss_mib())
    peaks: list[Any] = [rss]
    if error is None:  # every rank reached here: gather the per-rank peaks
        peaks = [None] * world
        dist.all_gather_object(peaks, rss)
    return {
        "rank": rank,
        "world": world,
        "backend": dist.get_backend(),
        "model": args.model,
        "layers": args.layers,
        "embedding": args.embedding,
        "attn": args.attn,
        "root_policy": args.root_policy,
        "output_fp32": args.output_fp32,
        "checkpointing": args.checkpointing,
        "compile": args.backend if args.compile else None,
        "fsdp": args.fsdp,
        "fullgraph": args.fullgraph,
        "recompile_limit": args.recompile_limit,
        "vary_seq": args.vary_seq,
        "pair": args.pair,
        "sac": args.sac,
        "shard_child": args.shard_child,
        "embed_outside": args.embed_outside,
        "switch_attn_before_backward": args.switch_attn_before_backward,
        "emulated_phase_flag": args.phase_flag,
        "backward_thread": args.backward_thread,
        "backward_thread_intra_op_threads": sorted(backward_threads),
        "transformers": transformers.__version__,
        "checkpoint_wraps_call": _checkpoints_call(),
        "losses": losses,
        "losses_hex": [x.hex() for x in losses],
        "grad_norms_hex": [x.hex() for x in norms],
        "step_s": times,
        "median_step_s": statistics.median(times[1:]) if len(times) > 1 else None,
        "peak_rss_mib_per_step": rss,
        "peak_rss_mib_per_rank": [max(p) if p else None for p in peaks],
        "error": error,
        "error_detail": error_detail,
        "error_traceback": error_traceback,
        "counts": _counts(),
        "unshard_counts": _counts(UNSHARD_FIX),
        "storage_key_counts": _counts(STORAGE_KEY_FIX),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="llama")
    parser.add_argument("--attn", choices=["sdpa", "eager", "flex_attention"], default="sdpa")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--embedding", choices=["fp32", "shared"], default="fp32")
    parser.add_argument("--root-policy", choices=["mp", "none"], default="mp", help="the root's MixedPrecisionPolicy")
    parser.add_argument("--output-fp32", action="store_true", help="output_dtype=float32 in the policy")
    parser.add_argument("--raise", dest="raise_errors", action="store_true", help="let a failed step's error propagate")
    parser.add_argument("--compile", action="store_true", help="torch.compile each decoder layer")
    parser.add_argument(
        "--no-checkpointing",
        dest="checkpointing",
        action="store_false",
        help="no gradient checkpointing: the reference a correct recompute must match bit for bit",
    )
    parser.add_argument("--backend", default="inductor", help="the per-layer compile backend")
    parser.add_argument("--no-fsdp", dest="fsdp", action="store_false", help="no fully_shard: a replica per rank")
    parser.add_argument(
        "--fullgraph", action="store_true", help="compile each layer with fullgraph=True, dynamic=False"
    )
    parser.add_argument(
        "--recompile-limit", type=int, default=None, help="the training thread's torch._dynamo.config.recompile_limit"
    )
    parser.add_argument("--vary-seq", action="store_true", help="a new sequence length every step (SEQ_LENS)")
    parser.add_argument(
        "--phase-flag", action="store_true", help="emulated training-state flag, flipped between forward and backward"
    )
    parser.add_argument("--backward-thread", action="store_true", help="run loss.backward() on a worker thread")
    parser.add_argument(
        "--pair", action="store_true", help="two forwards (--seq and --seq + 16 tokens) before one backward"
    )
    parser.add_argument(
        "--sac",
        action="store_true",
        help="selective activation checkpointing (context_fn) saving Inductor-compiled regions, which it wraps",
    )
    parser.add_argument(
        "--shard-child",
        action="append",
        default=[],
        help="fully_shard this submodule of each decoder layer too (a nested unit; e.g. self_attn, mlp.experts)",
    )
    parser.add_argument(
        "--embed-outside",
        action="store_true",
        help="compute inputs_embeds with the model's embedding, outside the root's forward (an ordinary misuse)",
    )
    parser.add_argument(
        "--switch-attn-before-backward",
        action="store_true",
        help="set the attention implementation to eager between forward and backward (a model changed before its recompute)",
    )
    parser.add_argument("--spawn", type=int, default=0, help="start this many gloo ranks (CPU)")
    parser.add_argument("--timeout", type=float, default=1500)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--deterministic", choices=["on", "off"], default="on")
    args = parser.parse_args(argv)
    args.device = "cpu"  # what titan_job's _determinism reads
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)  # before torch
    if args.spawn:
        return spawn(args, argv, script=__file__)
    from torch.distributed.elastic.multiprocessing.errors import record

    # record: under torchrun an uncaught error (--raise) is also written to torchelastic's error file
    return int(record(_run_rank)(args))


def _run_rank(args: argparse.Namespace) -> int:
    import torch.distributed as dist

    settings = _determinism(args)
    dist.init_process_group("gloo")
    try:
        report = run(args)
    finally:
        dist.destroy_process_group()
    return emit(report, settings)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
