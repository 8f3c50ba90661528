"""The upstream regression scenarios of TE PR #3284, run on TransformerEngine's real Python code on CPU.

Run: ``python te_scenarios.py`` in an environment made by ``te_standins/make_env.py`` (TE's Python
sources + the stand-in extension). Prints one JSON object: scenario name -> result. Run it with
``TORCHFIX_DISABLE=fp8-recompute`` for the unpatched behaviour.

The scenarios are the shipped reproduction's cases (``torchfix_fp8_recompute.reproduction``:
``recompute_steps``, whose ``inner`` non-reentrant run is fp8-recompute's declared reproduction), on
the platform it picks: here the CPU stand-in's (``transformer_engine_torch.cpu_platform``).

What is real: ``te.checkpoint`` (both the reentrant ``_CheckpointFunction`` and the non-reentrant
``_CheckpointFrame`` paths), ``activation_recompute_forward``, ``te.autocast`` / ``fp8_autocast``,
``FP8GlobalStateManager`` (global amax buffers, the recompute stash and its ``KeyError``), the
delayed-scaling recipe state (``RecipeState`` in TE 2.x, ``FP8TensorMeta`` + tensors as
``module/base.py`` builds them in TE 1.x), and the getters read through ``module/base.py``'s own
by-name bindings, the ones TE's modules call.

What stands in for hardware (no CUDA on a CPU torch; the stand-in's ``cpu_platform``, for the
scenarios only): ``_get_cuda_rng_state`` / ``_set_cuda_rng_state`` of ``distributed.py``
save/restore nothing, ``torch.cuda.current_device`` / ``get_device_properties`` answer "device 0,
compute capability 9.0" (TE's FP8-support check), and the FP8 layer below is not ``te.Linear`` (its
forward needs CUDA kernels) but the reproduction's ``DelayedScalingLayer``, which makes exactly the
delayed-scaling calls of ``TransformerEngineBaseModule.prepare_forward`` / ``end_forward`` (TE 2.18
``module/base.py`` 1535-1584; same calls in TE 1.13 ``module/base.py``), computes a bf16-free fp32
matmul scaled by the FP8 scale it would quantize with, and writes the input amax as the cast kernel
does.
"""

from __future__ import annotations

import json
from typing import Any

import transformer_engine.pytorch  # noqa: F401 - imported first, as a program does: the fixes apply here
from torchfix_fp8_recompute.reproduction import RECOMPUTE_SCENARIOS, Platform, platform, recompute_steps

#: (scenario, reentrant) of every run
SCENARIOS = [(s, r) for s in RECOMPUTE_SCENARIOS for r in (True, False)]


def where() -> Platform:
    """The reproduction's platform here (the CPU stand-in's on a CPU); an error where there is none."""
    found = platform()
    if isinstance(found, str):
        raise RuntimeError(found)
    return found


def main() -> None:
    import torchfix_core
    import transformer_engine

    row = next(r for r in torchfix_core.status() if r.id == "fp8-recompute")
    out: dict[str, Any] = {"te": str(transformer_engine.__version__), "fix_state": row.state, "fix_reason": row.reason}
    on = where()
    with on.active():
        for scenario, reentrant in SCENARIOS:
            out[f"{scenario}-{'reentrant' if reentrant else 'nonreentrant'}"] = recompute_steps(
                scenario, reentrant, on.device
            )
    from torchfix_core.testing import report_of

    out["report"] = report_of("fp8-recompute")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
