"""torchfix under torchao's float8 training on one CUDA GPU (fp8-minmax-store).

``torchao_job.py`` (see its docstring) in a fresh interpreter, torchfix on and with
``TORCHFIX_DISABLE=fp8-minmax-store``, each compiling afresh. torchao 0.17 has no workaround of its
own: where torch emits the ``PropagateNan`` min/max (2.14), its compiled float8 kernels contain it
without torchfix and none with it. torchao 0.18 replaces the same codegen itself in
``convert_to_float8_training``: the kernels are the same either way, the fix is applied first (at
Inductor's import) and keeps its cache key term, and the losses with and without torchfix are
bit-identical. With the fix, every gradient is finite.

Run on a CUDA machine with torchao installed: ``python -m pytest tests/clients/test_torchao.py -m gpu -s``.
Skipped without a GPU or torchao.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torchfix_core.testing import outside_validated_range, run_json_script
from torchfix_core.testing.fixtures import with_and_without_fix

torchao = pytest.importorskip("torchao", reason="torchao is not installed")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

JOB = Path(__file__).with_name("torchao_job.py")
FIX = "fp8-minmax-store"


def _job(fix: bool) -> dict[str, Any]:
    r = run_json_script([JOB, "--steps", "3"], env={} if fix else {"TORCHFIX_DISABLE": FIX}, timeout=900)
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')}\n{r.get('traceback', '')}"
    print(f"\ntorchao job, torchfix {'on' if fix else 'off'}: " + json.dumps(r))
    return r


with_fix, without = with_and_without_fix(_job)  # each a module fixture: one job with / without the fix


def _bug_codegen(r: dict[str, Any]) -> bool:
    """torch's own codegen emits PropagateNan (read in the run without the fix, before torchao)."""
    return r["torchao_patched"] is False and "PropagateNan" in r["minimum"]


def test_torchao_float8_kernels_propagate_nan_fails_without_fix(without: dict[str, Any]) -> None:
    if without["torchao_patched"]:
        pytest.skip(f"torchao {without['torchao']} replaces the min/max codegen itself")
    if not _bug_codegen(without):
        pytest.skip(f"torch {without['torch']} emits {without['minimum']}")
    assert without["kernels_with_propagate_nan"] > 0, without


def test_torchao_float8_kernels_where_form_passes_with_fix(with_fix: dict[str, Any], without: dict[str, Any]) -> None:
    assert with_fix["kernels_with_propagate_nan"] == 0, with_fix
    assert all(n == 0 for n in with_fix["nonfinite_grads"]), with_fix
    if outside_validated_range(FIX) is None and (_bug_codegen(without) or without["torchao_patched"]):
        assert with_fix["state"] == "applied", with_fix
    if with_fix["torchao_patched"]:
        # torchao's patch came second and its codegen is the fix's own form: same kernels, same losses
        assert with_fix["losses"] == without["losses"], (with_fix["losses"], without["losses"])
    else:
        assert with_fix["report"]["events"].get("where-min-max-emitted", 0) > 0, with_fix["report"]
