"""torchao float8 training under torchfix (fp8-minmax-store): ``python torchao_job.py``, one JSON line.

torchao's own ``convert_to_float8_training`` (dynamic tensorwise scaling, its default recipe) on a
bf16 MLP ``Linear(2048, 4096) -> SiLU -> Linear(4096, 2048)`` (no bias, seed 0) on one CUDA GPU,
``torch.compile`` of the whole model, ``--steps`` SGD steps (lr 1e-3) on a fixed ``(4096, 2048)``
bf16 input (``randn * 3``, one element 1000) with the loss ``out.float().pow(2).mean()``. The first
step runs under ``run_and_get_code`` (forward and backward kernels). Prints torch, triton and
torchao versions, whether torchao's own min/max patch is set (``torchao.float8._inductor_patch
._PATCHED``, torchao 0.18+), what ``TritonOverrides.minimum`` emits, whether the generated kernels
contain ``PropagateNan``, the losses, the non-finite gradient elements per step, and the fix's
state and report. The FX graph cache is off (every run compiles afresh).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any

FIX = "fp8-minmax-store"


def job(steps: int) -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config
    import torchao
    import torchfix_core
    from torch._inductor.utils import run_and_get_code
    from torchao.float8 import convert_to_float8_training
    from torchfix_core.testing import report_of

    inductor_config.fx_graph_cache = False
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(2048, 4096, bias=False), torch.nn.SiLU(), torch.nn.Linear(4096, 2048, bias=False)
    ).to(device="cuda", dtype=torch.bfloat16)
    convert_to_float8_training(model)
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16) * 3.0
    x[0, 0] = 1000.0

    def step() -> float:
        loss = compiled(x).float().pow(2).mean()
        loss.backward()
        return float(loss.item())

    losses, nonfinite = [], []
    for i in range(steps):
        if i == 0:
            loss, code = run_and_get_code(step)
        else:
            loss = step()
        losses.append(loss)
        nonfinite.append(sum(int((~torch.isfinite(p.grad.float())).sum().item()) for p in model.parameters()))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    from torch._inductor.codegen.triton import TritonOverrides

    patch = sys.modules.get("torchao.float8._inductor_patch")
    return {
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "torchao": torchao.__version__,
        "torchao_patched": bool(getattr(patch, "_PATCHED", False)),
        "minimum": TritonOverrides.minimum("a", "b"),
        "kernels_with_propagate_nan": sum(c.count("PropagateNan") for c in code),
        "losses": losses,
        "nonfinite_grads": nonfinite,
        "state": next((str(r.state) for r in torchfix_core.status() if r.id == FIX), "absent"),
        "report": report_of(FIX),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    try:
        out: dict[str, Any] = {"ok": True, **job(args.steps)}
    except Exception as exc:  # noqa: BLE001 - reported to the test as JSON
        out = {"ok": False, "error_type": type(exc).__name__, "error": str(exc), "traceback": traceback.format_exc()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
