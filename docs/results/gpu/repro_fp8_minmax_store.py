"""Reproduction attempt for the fp8 min/max store miscompile (triton-lang/triton#11111), one GPU.

torch 2.14/2.15 Inductor emits ``tl.minimum/maximum(a, b, tl.PropagateNan.ALL)`` for ``minimum`` /
``maximum`` (pytorch PR #186933; 2.13 and older emit ``triton_helpers.minimum/maximum``, the
``tl.where`` form, on CUDA). Per torchao PRs #4652 / #4657 and the Triton issue, the ``min.NaN`` /
``max.NaN`` PTX next to a transposed, vectorized 1-byte fp8 store makes Triton write garbage bytes
in the transposed copy for some launch configs; the contiguous copy of the same value is clean.
No torchao here. Two parts, each run in its own process per mode:

* ``inductor``: a compiled dynamic-scaling cast like float8 training's backward
  (``amax = g.abs().amax()``, ``scale = FMAX / amax.clamp(min=1e-12)``,
  ``y = (g.float() * scale).clamp(-FMAX, FMAX).to(fp8)``, returning ``y`` and
  ``y.t().contiguous()``), bf16 input, for several shapes and both e4m3fn and e5m2, with
  ``max_autotune_pointwise`` on. Every launch config that Inductor compiled for every kernel is
  run in turn (the other kernels keep their first config; the launchers that lose autotuning are
  kept loaded, which torch 2.15 would otherwise unload) and both outputs are compared bytewise
  with eager. Mode ``patched`` first replaces ``TritonOverrides.minimum/maximum`` with the
  inline ``tl.where`` form (what torchao 0.18's ``_inductor_patch`` does).
* ``triton``: a hand-written Triton kernel of the same shape (2-D tile, clamp via min/max, fp8
  cast, contiguous and transposed store), swept over XBLOCK x YBLOCK x num_warps, once with
  ``tl.minimum/maximum(..., PropagateNan.ALL)`` and once with the ``tl.where`` form.

Usage: ``python repro_fp8_minmax_store.py``; prints JSON lines and a summary; exit status 0.

The cast, the run over every launcher with its bytewise comparison, and the launcher bookkeeping are imported from the fix's
shipped reproduction (``torchfix_fp8_minmax.reproduction``: install torchfix-fp8-minmax, or put its
``src`` on ``PYTHONPATH``; those functions need no other part of torchfix). The logs of 2026-12-02/03 were made by this script's self-contained version (commit
bc89b41), the same code.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

# the compiled cast, the run over every launcher and the launcher bookkeeping are the shipped reproduction's
from torchfix_fp8_minmax.reproduction import cast as _cast  # noqa: E402
from torchfix_fp8_minmax.reproduction import differing as _differing  # noqa: E402
from torchfix_fp8_minmax.reproduction import every_launcher as _every_launcher  # noqa: E402
from torchfix_fp8_minmax.reproduction import launchers_kept  # noqa: E402

#: the launchers stay recorded (and loaded) for the rest of this interpreter
_KEPT = contextlib.ExitStack()

SHAPES = [(4096, 4096), (8192, 1024), (1024, 8192), (2048, 5120), (768, 3072), (3072, 768), (1000, 1000), (257, 4096)]


def _dtypes() -> list[Any]:
    import torch

    return [torch.float8_e4m3fn, torch.float8_e5m2]


def _patch_where_form() -> None:
    from torch._inductor.codegen.triton import TritonOverrides

    def minimum(a: str, b: str) -> str:
        return f"tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})"

    def maximum(a: str, b: str) -> str:
        return f"tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})"

    TritonOverrides.minimum = staticmethod(minimum)
    TritonOverrides.maximum = staticmethod(maximum)


def inductor_child(mode: str) -> dict[str, Any]:
    import torch
    import torch._inductor.config as iconfig

    iconfig.fx_graph_cache = False
    iconfig.max_autotune_pointwise = True
    if mode == "patched":
        _patch_where_form()
    stash = _KEPT.enter_context(launchers_kept())
    torch._dynamo.config.recompile_limit = 64
    from torch._inductor.codegen.triton import TritonOverrides

    codegen = TritonOverrides.minimum("a", "b")
    rows = []
    for dt in _dtypes():
        for m, n in SHAPES:
            torch._dynamo.reset()
            stash.clear()
            torch.manual_seed(0)
            g = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3.0
            g[0, 0] = 1000.0  # one large value: most of the tensor lands in the fp8 subnormal/low range
            ref_y, ref_t = _cast(g, dt)
            fn = torch.compile(_cast, dynamic=False)
            fn(g, dt)
            configs_run, red = _every_launcher(fn, (g, dt), stash, (ref_y, ref_t))
            rows.append(
                {
                    "dtype": str(dt),
                    "shape": [m, n],
                    "kernels": len(stash),
                    "configs_run": configs_run,
                    "configs_red": len(red),
                    "red": red[:4],
                }
            )
            print("ROW " + json.dumps(rows[-1]), flush=True)
    return {
        "part": "inductor",
        "mode": mode,
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "codegen_minimum": codegen,
        "rows": rows,
        "configs_run": sum(r["configs_run"] for r in rows),
        "configs_red": sum(r["configs_red"] for r in rows),
    }


TRITON_SRC = """
import triton
import triton.language as tl


@triton.jit
def cast_t(X, S, OUT, OUT_T, M, N, FMAX: tl.constexpr, NAN_FORM: tl.constexpr,
           YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    rows = tl.program_id(1) * YBLOCK + tl.arange(0, YBLOCK)[:, None]
    cols = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(X + rows * N + cols, mask, other=0.0).to(tl.float32)
    s = tl.load(S)
    v = x * s
    if NAN_FORM:
        v = tl.maximum(v, -FMAX, tl.PropagateNan.ALL)
        v = tl.minimum(v, FMAX, tl.PropagateNan.ALL)
    else:
        v = tl.where((v > -FMAX) | (v != v), v, -FMAX)
        v = tl.where((v < FMAX) | (v != v), v, FMAX)
    f = v.to(OUT.dtype.element_ty)
    tl.store(OUT + rows * N + cols, f, mask)
    tl.store(OUT_T + cols * M + rows, f, mask)
"""


def triton_child(mode: str) -> dict[str, Any]:
    import importlib.util

    import torch
    import triton

    path = os.path.join(tempfile.mkdtemp(), "fp8_cast_kernel.py")
    with open(path, "w") as f:
        f.write(TRITON_SRC)
    spec = importlib.util.spec_from_file_location("fp8_cast_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    nan_form = mode == "propagate-nan"
    rows = []
    for dt in _dtypes():
        fmax = float(torch.finfo(dt).max)
        for m, n in [(4096, 4096), (1000, 1000), (257, 4096)]:
            torch.manual_seed(0)
            g = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3.0
            g[0, 0] = 1000.0
            ref_y, ref_t = _cast(g, dt)
            scale = (fmax / g.abs().amax().float().clamp(min=1e-12)).reshape(1)
            red = 0
            total = 0
            examples = []
            for yb in (1, 4, 16, 32, 64, 128):
                for xb in (16, 32, 64, 128, 256):
                    if yb * xb > 16384:
                        continue
                    for warps in (1, 2, 4, 8):
                        y = torch.empty_like(ref_y)
                        yt = torch.empty_like(ref_t)
                        grid = (triton.cdiv(n, xb), triton.cdiv(m, yb))
                        mod.cast_t[grid](
                            g, scale, y, yt, m, n, FMAX=fmax, NAN_FORM=nan_form, YBLOCK=yb, XBLOCK=xb, num_warps=warps
                        )
                        torch.cuda.synchronize()
                        total += 1
                        by, bt = _differing(y, ref_y), _differing(yt, ref_t)
                        if by["bytes_diff"] or bt["bytes_diff"]:
                            red += 1
                            if len(examples) < 4:
                                examples.append(
                                    {"YBLOCK": yb, "XBLOCK": xb, "num_warps": warps, "contiguous": by, "transposed": bt}
                                )
            rows.append({"dtype": str(dt), "shape": [m, n], "configs_run": total, "configs_red": red, "red": examples})
            print("ROW " + json.dumps(rows[-1]), flush=True)
    return {
        "part": "triton",
        "mode": mode,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "rows": rows,
        "configs_run": sum(r["configs_run"] for r in rows),
        "configs_red": sum(r["configs_red"] for r in rows),
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("inductor", "triton"):
        part, mode = sys.argv[1], sys.argv[2]
        record = inductor_child(mode) if part == "inductor" else triton_child(mode)
        print("RESULT " + json.dumps(record), flush=True)
        return
    parts = sys.argv[1:] or ["triton", "inductor"]
    summary = {}
    jobs = {"triton": ("propagate-nan", "where"), "inductor": ("unpatched", "patched")}
    for part in parts:
        for mode in jobs[part]:
            proc = subprocess.run([sys.executable, __file__, part, mode], capture_output=True, text=True, check=False)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if not lines:
                print(f"{part}/{mode}: rc={proc.returncode}\n{proc.stderr[-4000:]}")
                summary[f"{part}/{mode}"] = f"error rc={proc.returncode}"
                continue
            record = json.loads(lines[-1][len("RESULT ") :])
            print(json.dumps(record))
            summary[f"{part}/{mode}"] = f"{record['configs_red']}/{record['configs_run']} configs red"
    print("SUMMARY " + json.dumps(summary))


if __name__ == "__main__":
    main()
