"""Helpers of the fp8-recompute tests: is TransformerEngine importable, run the scenarios.

TE tests run only in an environment made by ``te_standins/make_env.py`` (TE's real Python sources
plus the stand-in extension); in the default environment (no TE) they skip and
``test_not_installed.py`` runs instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import run_json_script

HERE = Path(__file__).resolve().parent
TE_INSTALLED = importlib.util.find_spec("transformer_engine") is not None

requires_te = pytest.mark.skipif(
    not TE_INSTALLED, reason="TransformerEngine is not installed (make an env with tests/te_standins/make_env.py)"
)

MODES = ["reentrant", "nonreentrant"]  # te.checkpoint(use_reentrant=True / False), in the scenario names
KEY_ERROR = "KeyError: 'global_fp8_buffer_pos_fwd_recompute'"  # the unpatched recompute's failure


#: fix id -> (its scenario script, here; the name prefix of its kept results)
SCENARIOS = {
    "fp8-recompute": ("te_scenarios.py", "te"),  # TE PR #3284
    "fp8-recompute-pairing": ("te_pairing_scenarios.py", "pairing-te"),  # TE PR #3394
}


def run_scenarios(fix_id: str = "fp8-recompute", *, fix: bool) -> dict[str, Any]:
    """Run the scenario script of ``fix_id`` in a fresh interpreter, with the fix or with
    ``TORCHFIX_DISABLE=<fix_id>`` (the package's other fix stays active: on TE 2.18 the pairing
    scenarios need fp8-recompute). With ``FP8_RECOMPUTE_RESULTS_DIR`` set, the raw result is also
    written there (``te_standins/results_table.py`` reads it for the docs tables)."""
    script, prefix = SCENARIOS[fix_id]
    result = run_json_script([HERE / script], env=None if fix else {"TORCHFIX_DISABLE": fix_id})
    keep = os.environ.get("FP8_RECOMPUTE_RESULTS_DIR")
    if keep:
        name = f"{prefix}-{result['te']}-{'with' if fix else 'without'}-fix.json"
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / name).write_text(json.dumps(result, indent=1))
    return result


def pairing_out_of_range() -> str:
    """Why fp8-recompute-pairing is outside its validated range here ("" when inside): its tests
    then only check the ``out-of-range`` state (its scenarios use TE 2.18+'s module layout)."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    from torchfix_fp8_recompute.package import PAIRING

    for dist, spec in PAIRING.targets.items():
        name = "transformer-engine" if dist == "transformer_engine" else dist
        try:
            version = Version(Version(metadata.version(name)).base_version)
        except metadata.PackageNotFoundError:
            return f"{name} is not installed"
        if version not in SpecifierSet(spec):
            return f"{name} {version} is outside fp8-recompute-pairing's validated range {spec}"
    return ""


def te_has_pairing_fix() -> bool:
    """TE 2.20.2+ (PR #3394): ``_CheckpointFunction.forward`` reads ``ctx.needs_input_grad`` (TE's own
    code, not torchfix's copy, whose filename starts with ``<torchfix``)."""
    import transformer_engine.pytorch.distributed as dist

    code = dist._CheckpointFunction.forward.__code__
    return "needs_input_grad" in code.co_names and not code.co_filename.startswith("<torchfix")


def te_has_upstream_fix() -> bool:
    """TE 2.19+ (PR #3284): ``distributed.py`` defines ``_IN_ACTIVATION_RECOMPUTE_REGION``."""
    import transformer_engine.pytorch.distributed as dist

    return hasattr(dist, "_IN_ACTIVATION_RECOMPUTE_REGION")
