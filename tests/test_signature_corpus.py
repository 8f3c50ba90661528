"""No false claims: ordinary torch failures never match a known bug's signature.

A child interpreter produces real errors on the CPU torch of this environment (with every fix of
the family installed and active, as a user has them): an out-of-memory allocation, dtype and shape
mismatches in plain and nn code (2-D and 3-D linear, SDPA; in a checkpoint's forward; in the recompute
of a hook-free function, which fsdp-recompute-cast's context tells from its bug), a missing grad, a second backward, an in-place modification, a
nondeterministic eager checkpoint, a fullgraph graph break, a recompile-limit hit, a gloo
rendezvous timeout. Each one's printed traceback is matched (the text path of ``torchfix-doctor
explain``) and so is the live exception (the uncaught-exception note's path), against every known
signature: the installed fixes', the family catalog's and the investigated bugs'. Two texts that
only a GPU job prints (CUDA out of memory, the NCCL watchdog timeout) are matched as their wording
appears in torch's sources; the GPU test below produces the CUDA one for real (on a CUDA machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torchfix_core import _explain
from torchfix_core.testing import clean_environ

CORPUS = textwrap.dedent(
    r"""
    import json, os, sys, traceback
    from datetime import timedelta
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint
    from torchfix_core import _explain

    torch.manual_seed(0)
    entries = _explain.known_entries()
    out = []

    def case(name):
        def run(fn):
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001
                live = _explain.match_failures(_explain.failures_in_exception(exc), entries)
                out.append({"name": name, "traceback": traceback.format_exc(),
                            "live": [m.entry.id for m in live]})
            else:
                out.append({"name": name, "traceback": None, "live": []})
        return run

    @case("cpu-oom")
    def _():
        torch.empty(1 << 60, dtype=torch.uint8)

    @case("mm-dtype")
    def _():
        torch.randn(2, 3) @ torch.randn(3, 4, dtype=torch.bfloat16)

    @case("linear-dtype")
    def _():
        nn.Linear(3, 4)(torch.randn(2, 3, dtype=torch.bfloat16))

    @case("linear-dtype-in-checkpoint-forward")
    def _():
        layer = nn.Linear(3, 4)
        checkpoint(layer, torch.randn(2, 3, dtype=torch.bfloat16, requires_grad=True), use_reentrant=False)

    @case("sdpa-dtype")
    def _():
        q = torch.randn(1, 2, 4, 8)
        torch.nn.functional.scaled_dot_product_attention(q, q, q.bfloat16())

    @case("linear-3d-dtype")
    def _():
        nn.functional.linear(torch.randn(2, 3, 4), torch.randn(5, 4, dtype=torch.bfloat16))

    @case("linear-3d-dtype-in-hooked-module-forward")
    def _():
        layer = nn.Linear(4, 5).bfloat16()
        layer.register_forward_pre_hook(lambda module, args: None)
        checkpoint(layer, torch.randn(2, 3, 4, requires_grad=True), use_reentrant=False)

    @case("dtype-in-plain-recompute")
    def _():
        # a hook-free function whose recompute differs from its forward (a global it reads changed):
        # the dtype mismatch is raised in a recompute, but no module with hooks (FSDP's) is called
        state = {"dtype": torch.bfloat16}
        w = torch.randn(5, 4, dtype=torch.bfloat16, requires_grad=True)
        def body(x):
            return nn.functional.linear(x.to(state["dtype"]), w)
        y = checkpoint(body, torch.randn(2, 3, 4, requires_grad=True), use_reentrant=False)
        state["dtype"] = torch.float32
        y.sum().backward()

    @case("shape")
    def _():
        torch.randn(2, 3) @ torch.randn(4, 5)

    @case("missing-grad")
    def _():
        torch.randn(3).sum().backward()

    @case("backward-twice")
    def _():
        x = torch.randn(3, requires_grad=True)
        y = (x.exp()).sum()
        y.backward()
        y.backward()

    @case("inplace")
    def _():
        x = torch.randn(3, requires_grad=True)
        y = x.sigmoid()
        y.mul_(2)
        y.sum().backward()

    @case("nondeterministic-eager-checkpoint")
    def _():
        calls = []
        def body(x):
            calls.append(1)
            return x[: len(calls) + 1].sin()
        x = torch.randn(4, requires_grad=True)
        checkpoint(body, x, use_reentrant=False).sum().backward()

    @case("index")
    def _():
        torch.randn(3)[torch.tensor([5])]

    @case("fullgraph-graph-break")
    def _():
        @torch.compile(fullgraph=True, backend="eager")
        def f(x):
            if x.sum() > 0:
                return x + 1
            return x - 1
        f(torch.randn(3))

    @case("recompile-limit")
    def _():
        import torch._dynamo
        torch._dynamo.config.recompile_limit = 1
        @torch.compile(fullgraph=True, backend="eager", dynamic=False)
        def g(x, n):
            return x * n
        for n in range(3):
            g(torch.randn(2), n)

    @case("gloo-rendezvous-timeout")
    def _():
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29731", rank=0, world_size=2,
                                timeout=timedelta(seconds=1))

    print(json.dumps(out))
    """
)

#: wording of failures only a GPU job prints, as torch's sources format them
GPU_TEXTS = {
    "cuda-oom": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
        "139.72 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 138.65 GiB memory in "
        "use. Of the allocated memory 137.20 GiB is allocated by PyTorch, and 3.12 MiB is reserved by PyTorch but "
        "unallocated."
    ),
    "nccl-watchdog": (
        "[rank1]:[E1202 01:02:03.000000000 ProcessGroupNCCL.cpp:685] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran "
        "for 600021 milliseconds before timing out.\n"
        "torch.distributed.DistBackendError: [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for "
        "600021 milliseconds before timing out."
    ),
}


def test_ordinary_torch_failures_match_no_known_bug() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CORPUS], capture_output=True, text=True, env=clean_environ(), timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    corpus = json.loads(proc.stdout.strip().splitlines()[-1])
    did_not_fail = [c["name"] for c in corpus if c["traceback"] is None]
    assert did_not_fail == [], f"these corpus cases raised nothing on this torch: {did_not_fail}"
    entries = _explain.known_entries()
    names = _explain.names_of(entries)
    claimed = {}
    for case in corpus:
        text = [
            m.entry.id for m in _explain.match_failures(_explain.failures_in_text(case["traceback"], names), entries)
        ]
        if text or case["live"]:
            claimed[case["name"]] = {
                "text": text,
                "live": case["live"],
                "error": case["traceback"].strip().splitlines()[-1],
            }
    for name, text in GPU_TEXTS.items():
        ids = [m.entry.id for m in _explain.match_failures(_explain.failures_in_text(text, names), entries)]
        if ids:
            claimed[name] = {"text": ids}
    assert claimed == {}, json.dumps(claimed, indent=1)


CUDA_CORPUS = textwrap.dedent(
    r"""
    import json, traceback
    import torch
    from torch import nn
    from torchfix_core import _explain

    entries = _explain.known_entries()
    out = []
    for name, fn in (
        ("cuda-oom", lambda: torch.empty(1 << 48, dtype=torch.uint8, device="cuda")),
        ("cuda-linear-dtype", lambda: nn.Linear(3, 4).cuda()(torch.randn(2, 3, device="cuda", dtype=torch.bfloat16))),
    ):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001
            live = _explain.match_failures(_explain.failures_in_exception(exc), entries)
            out.append({"name": name, "traceback": traceback.format_exc(), "live": [m.entry.id for m in live]})
    print(json.dumps(out))
    """
)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_ordinary_cuda_failures_match_no_known_bug() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CUDA_CORPUS], capture_output=True, text=True, env=clean_environ(), timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    corpus = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [c["name"] for c in corpus] == ["cuda-oom", "cuda-linear-dtype"], corpus
    assert "OutOfMemoryError" in corpus[0]["traceback"], corpus[0]["traceback"][-500:]
    entries = _explain.known_entries()
    names = _explain.names_of(entries)
    claimed = {
        c["name"]: [
            m.entry.id for m in _explain.match_failures(_explain.failures_in_text(c["traceback"], names), entries)
        ]
        + c["live"]
        for c in corpus
    }
    assert all(not ids for ids in claimed.values()), claimed
