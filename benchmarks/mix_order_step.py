"""Step time of the compiled adaLN case of mix-order-view-write with the fix, without it, and with
mix-order reduction off (the configuration workaround).

    python benchmarks/mix_order_step.py [--shape 16384,2048] [--dtype bfloat16] [--reps 30] [--rounds 3]

The case of ``torchfix_mix_order.reproduction`` (a table ``[1, 4, D]`` chunked into the scales and
shifts of two chained LayerNorms of ``x [1, S, D]``): one training step (forward and backward, the
table's gradient) per call. Three variants, each its own code object, compiled in this process with
the compile caches off: ``fix`` while mix-order-view-write is applied, ``unpatched`` after
``torchfix_core.revert(only=["mix-order-view-write"])`` (the release's wrapper line: the table's
gradient partly unwritten), ``mix-order off`` with ``triton.mix_order_reduction = False``. Timed
interleaved (A B C A B C ...; the median of CUDA-event times per call). Prints one JSON object with
the milliseconds and the ratios to ``unpatched``, and the max abs error of each variant's gradient
against the ``mix-order off`` one.

Needs a CUDA GPU with Triton and the fix applied (torch 2.11-2.14 with torchfix-mix-order
installed); elsewhere it says why and exits 0 (on torch 2.15 the release's own line is the fix's).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from _timing import cuda_medians

FIX = "mix-order-view-write"
SOURCE = """
def forward(x, table):
    return modulated_norms(x, table)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shape", default="16384,2048", help="rows,features of x (rows x features per LayerNorm)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: mix-order reduction is a fusion of Inductor's Triton backend; nothing timed")
        return 0
    import torch._functorch.config as functorch_config
    import torch._inductor.codecache  # noqa: F401 - with codegen.simd, the fix's triggers
    import torch._inductor.codegen.simd  # noqa: F401
    import torch._inductor.config as inductor_config
    import torchfix_core
    from torchfix_mix_order.reproduction import CHUNKS, modulated_norms

    state = next((s.state.value for s in torchfix_core.status() if s.id == FIX), "not installed")
    if state != "applied":
        print(f"{FIX} is {state} here: nothing to compare (install torchfix-mix-order; torch 2.11-2.14)")
        return 0
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    seq, dim = (int(n) for n in args.shape.split(","))
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    table = torch.nn.Parameter(torch.randn(1, CHUNKS, dim, device="cuda", dtype=dtype) / dim**0.5)
    x = torch.randn(1, seq, dim, device="cuda", dtype=dtype)
    go = torch.randn(1, seq, dim, device="cuda", dtype=dtype)
    fns: dict[str, Callable[[], Any]] = {}
    grads: dict[str, Any] = {}
    for variant in ("fix", "unpatched", "mix-order off"):
        if variant == "unpatched":
            torchfix_core.revert(only=[FIX])
        namespace: dict[str, Any] = {"modulated_norms": modulated_norms}
        exec(compile(SOURCE, f"<mix-order-step-{variant}>", "exec"), namespace)  # noqa: S102 - own code objects
        compiled = torch.compile(namespace["forward"], dynamic=False)

        def run(compiled: Any = compiled) -> Any:
            table.grad = None
            compiled(x, table).backward(go)
            return table.grad

        with inductor_config.patch({"triton.mix_order_reduction": variant != "mix-order off"}):
            grads[variant] = run().detach().clone()  # compiles here: forward and backward
        fns[variant] = run
    ms = cuda_medians(fns, args.reps, args.rounds)
    reference = grads["mix-order off"].double()
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(),
                "shape": [1, seq, dim],
                "dtype": args.dtype,
                "ms": ms,
                "ratio_to_unpatched": {k: round(v / ms["unpatched"], 4) for k, v in ms.items()},
                "max_abs_diff_to_mix_order_off": {
                    k: float((g.double() - reference).abs().max().item()) for k, g in grads.items()
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
