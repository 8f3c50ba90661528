"""GPU check of torchfix-fp8-recompute on real TransformerEngine (FP8-capable GPU, sm89+).

A delayed-scaling (``Format.HYBRID``) ``te.Linear`` with bf16 parameters runs under ``te.checkpoint``;
the checkpointed callable opens ``te.autocast`` (``te.fp8_autocast`` on TE < 2.8) itself. Two
training steps (SGD), reentrant and non-reentrant checkpoint, each in a fresh subprocess:

* without the fix (``TORCHFIX_DISABLE=fp8-recompute``): TE 1.13-2.18 raise
  ``KeyError: 'global_fp8_buffer_pos_fwd_recompute'`` in the first backward;
* with the fix: both steps complete with finite loss and gradients. For reference the table also
  shows the largest weight-gradient difference to the same two steps run without checkpointing
  (same seeds; expected about 0 when the recompute reproduced the forward's FP8 scales; printed,
  not asserted). On TE 2.19+ the fix reports not-needed and both columns pass.

Usage (TE with its torch extension, torchfix-core and torchfix-fp8-recompute installed)::

    python packages/torchfix-fp8-recompute/gpu/check_te_fp8.py

Prints a result table and a JSON line; exits 1 if a "with fix" case fails, or if a "without fix" case
fails on a TE that has no upstream fix in a way other than the known KeyError.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

STASH_KEY = "global_fp8_buffer_pos_fwd_recompute"


def _autocast(te: Any, recipe: Any) -> Any:
    if hasattr(te, "autocast"):
        return te.autocast(enabled=True, recipe=recipe)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)


def _checkpoint(te: Any, fn: Any, x: Any, reentrant: bool) -> Any:
    return te.checkpoint(fn, x, use_reentrant=reentrant)


def child(reentrant: bool) -> dict[str, Any]:
    import torch
    import torchfix_core
    import transformer_engine
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Format

    row = next(r for r in torchfix_core.status() if r.id == "fp8-recompute")
    out: dict[str, Any] = {
        "te": str(transformer_engine.__version__),
        "torch": torch.__version__,
        "fix_state": row.state,
        "error": None,
    }

    def train(checkpointed: bool) -> tuple[list[float], list[Any], Any]:
        torch.manual_seed(0)
        lin = te.Linear(256, 256, params_dtype=torch.bfloat16).cuda()
        opt = torch.optim.SGD(lin.parameters(), lr=1e-3)
        recipe = DelayedScaling(fp8_format=Format.HYBRID)

        def body(x: Any) -> Any:
            with _autocast(te, recipe):
                return lin(x)

        losses, grads = [], []
        gen = torch.Generator(device="cuda").manual_seed(1)
        for _ in range(2):
            x = torch.randn(32, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True, generator=gen)
            y = _checkpoint(te, body, x, reentrant) if checkpointed else body(x)
            loss = y.float().pow(2).mean()
            loss.backward()
            grads.append(lin.weight.grad.detach().float().clone())
            losses.append(float(loss))
            opt.step()
            opt.zero_grad(set_to_none=True)
        return losses, grads, lin

    try:
        losses, grads, lin = train(checkpointed=True)
        ref_losses, ref_grads, _ = train(checkpointed=False)
        out["losses"] = losses
        out["finite"] = all(torch.isfinite(g).all().item() for g in grads) and all(
            math.isfinite(loss) for loss in losses
        )
        out["max_grad_diff_vs_no_checkpoint"] = max(float((a - b).abs().max()) for a, b in zip(grads, ref_grads))
        out["loss_diff_vs_no_checkpoint"] = max(abs(a - b) for a, b in zip(losses, ref_losses))
        out["stash_key_present"] = STASH_KEY in lin.fp8_meta
    except Exception as exc:  # noqa: BLE001 - the unpatched failure is the result
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def main() -> int:
    if "--child" in sys.argv:
        print(json.dumps(child(reentrant=sys.argv[-1] == "reentrant")))
        return 0
    rows = []
    for mode in ("reentrant", "nonreentrant"):
        for fix in (False, True):
            env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
            if not fix:
                env["TORCHFIX_DISABLE"] = "fp8-recompute"
            proc = subprocess.run(
                [sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True, timeout=900
            )
            try:
                res = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                res = {"error": f"child exited {proc.returncode}: {proc.stderr.strip()[-800:]}"}
            res.update(mode=mode, fix=fix)
            rows.append(res)
    print(f"{'checkpoint':<13} {'fix':<8} {'state':<12} {'result':<58} {'max|dgrad| vs no-ckpt':>22}")
    bad = False
    for r in rows:
        ok = r.get("error") is None and r.get("finite")
        result = "OK, losses " + ", ".join(f"{v:.5f}" for v in r.get("losses", [])) if ok else str(r.get("error"))[:58]
        diff = r.get("max_grad_diff_vs_no_checkpoint")
        print(
            f"{r['mode']:<13} {('on' if r['fix'] else 'off'):<8} {r.get('fix_state', '?'):<12} {result:<58} "
            f"{'' if diff is None else f'{diff:.3g}':>22}"
        )
        if r["fix"] and not ok:
            bad = True
        if not r["fix"] and not ok and "global_fp8_buffer_pos_fwd_recompute" not in str(r.get("error")):
            bad = True
    print(json.dumps(rows))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
