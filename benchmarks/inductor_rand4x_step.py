"""Step time of compiled dropout with Inductor's 4x random path (``rand4x``) and without it (``tl.rand``,
what torchfix-inductor-rand4x leaves on torch 2.13 / 2.14, and torch 2.15's default).

    python benchmarks/inductor_rand4x_step.py [--shape 16,1024,4096] [--reps 30] [--rounds 3]

Two compiled functions per variant, each its own code object (compiled with ``dynamic=False``, the
compile caches off): a bf16 training step of ``dropout(x.transpose(1, 2).contiguous())`` under
non-reentrant activation checkpointing (forward and backward, the recompute included), and its
forward alone under ``no_grad``. The variants are made in one process, so they are timed interleaved
(A B A B ...; the median of CUDA-event times per call): ``rand4x`` compiled with the 4x path on
(``TORCHINDUCTOR_USE_RAND4X=1`` where the fix is applied, which it honours at each codegen call;
``config.use_rand4x`` on torch 2.15), ``tl.rand`` with it off (the fix's default; 2.15's default).
Prints one JSON object per measurement and the ratios ``tl.rand`` / ``rand4x``.

Needs a CUDA GPU with Triton, and a torch whose 4x path can be switched in process: 2.13 / 2.14 with
the fix applied, or 2.15. Elsewhere it says why and exits 0 (2.12 has no 4x path to compare with).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Callable, Iterator

from _timing import cuda_medians

OPT_IN = "TORCHINDUCTOR_USE_RAND4X"
FIX = "inductor-rand4x-dropout"
SOURCE = """
def forward(x):
    return torch.nn.functional.dropout(x.transpose(1, 2).contiguous(), p=0.5, training=True)

def step(x):
    return checkpoint(forward, x, use_reentrant=False)
"""


def switch() -> tuple[Callable[[bool], Any] | None, str]:
    """A context-manager factory ``four_x(on)`` that compiles with the 4x path on or off, and what it
    turns; ``(None, why)`` where this torch's path cannot be switched in this process."""
    import torch._inductor.codegen.triton as codegen
    import torch._inductor.config as config
    import torchfix_core

    if not hasattr(codegen.TritonOverrides, "_can_use_4x_random"):
        return None, "this torch has no 4x random path (torch 2.12 or older): nothing to compare"
    if hasattr(config, "use_rand4x"):
        return (lambda on: config.patch(use_rand4x=on)), "torch._inductor.config.use_rand4x (upstream's gate)"
    state = next((s.state.value for s in torchfix_core.status() if s.id == FIX), "not installed")
    if state != "applied":
        return None, f"the 4x path cannot be turned off here: {FIX} is {state} (install torchfix-inductor-rand4x)"

    @contextlib.contextmanager
    def four_x(on: bool) -> Iterator[None]:
        saved = os.environ.pop(OPT_IN, None)
        if on:
            os.environ[OPT_IN] = "1"
        try:
            yield
        finally:
            os.environ.pop(OPT_IN, None)
            if saved is not None:
                os.environ[OPT_IN] = saved

    return four_x, f"{OPT_IN}=1, honoured by {FIX}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shape", default="16,1024,4096", help="batch,time,channels of the bf16 input")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: the 4x random path is in Inductor's CUDA Triton kernels; nothing timed")
        return 0
    four_x, how = switch()
    if four_x is None:
        print(how)
        return 0
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from torch.utils.checkpoint import checkpoint

    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    shape = tuple(int(n) for n in args.shape.split(","))
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.ones(shape[0], shape[2], shape[1], device="cuda", dtype=torch.bfloat16)
    fns: dict[str, Callable[[], Any]] = {}
    for variant, on in (("rand4x", True), ("tl.rand", False)):
        namespace: dict[str, Any] = {"torch": torch, "checkpoint": checkpoint}
        exec(compile(SOURCE, f"<inductor-rand4x-step-{variant}>", "exec"), namespace)  # noqa: S102 - own code objects
        step = torch.compile(namespace["step"], dynamic=False)
        forward = torch.compile(namespace["forward"], dynamic=False)

        def train(step: Any = step) -> None:
            x.grad = None
            step(x).backward(grad)

        def infer(forward: Any = forward) -> None:
            with torch.no_grad():
                forward(x)

        with four_x(on):  # compile here: forward, backward (with the recompute) and the no-grad forward
            _, codes = run_and_get_code(lambda train=train, infer=infer: (train(), infer()))
        print(json.dumps({"variant": variant, "rand4x_calls": sum(c.count("rand4x(") for c in codes)}))
        fns[f"{variant} ac step"], fns[f"{variant} forward"] = train, infer
    ms = cuda_medians(fns, args.reps, args.rounds)
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "switch": how, "ms": ms}))
    for what in ("ac step", "forward"):
        ratio = ms[f"tl.rand {what}"] / ms[f"rand4x {what}"]
        print(f"{what}: rand4x {ms[f'rand4x {what}']:.3f} ms, tl.rand {ms[f'tl.rand {what}']:.3f} ms ({ratio:.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
