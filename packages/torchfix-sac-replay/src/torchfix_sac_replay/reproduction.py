"""The declared reproductions of the package's three fixes (``FixSpec.reproduction``), run by
``torchfix-doctor verify``, the package's tests and the combination suite
(``python -m torchfix_core.reproduction ID``, every other fix off):

* :func:`sac_replay`: ``reproduction_sac_replay``'s ``guard_miss`` (a recompute-time guard miss,
  ``backward()`` on a second thread);
* :func:`backward_context`: ``reproduction_backward_context`` (two compiled backwards of one
  ``backward()`` at the same time), in its own interpreter;
* :func:`sac_storage_key`: ``reproduction_sac_storage_key``'s ``upstream`` (upstream's regression test
  ``test_sac_cached_value_fifo_mismatch``).

Each returns an :class:`torchfix_core.reproduction.Outcome`: the bug observed (the exception, or the
size of a wrong gradient), not observed (what was compared), or cannot run here; any other failure
raises (the reproduction broke). Imported only when a reproduction runs; torch is imported inside
the functions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

from torchfix_core.reproduction import Outcome, cannot_run, not_observed, observed

#: what SAC's replay raises on sac-replay's bug (both wordings, torch 2.12 and 2.13+)
NOT_IN_STORAGE = "not found in storage"
#: what the second compiled backward raises on backward-context's bug
ALREADY_ENTERED = "is already entered"
#: what SAC's mix-up of compiled regions raises on sac-storage-key's bug (torch 2.10/2.11, 2.12)
STORAGE_KEY_ERRORS = {
    "RuntimeError": "Only Tensors of floating point and complex dtype can require gradients",
    "IndexError": "tuple index out of range",
}


def _cpu_only() -> None:
    """The CPU scenarios on a machine with a GPU: a first ``torch.compile`` inside a checkpointed
    forward would initialise CUDA there, which checkpoint refuses ("device state was initialized in
    the forward pass"). Hide the GPUs from this interpreter (CUDA is not initialised yet in it)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def _error(result: dict[str, Any]) -> str:
    """``ErrorType: first line of the message`` of a failed scenario result."""
    first = (str(result.get("error", "")).splitlines() or [""])[0]
    return f"{str(result.get('error_type', 'error')).rsplit('.', 1)[-1]}: {first}"


def sac_replay() -> Outcome:
    """sac-replay's reproduction (pytorch#186537): a compiled block with 8 Dynamo cache entries, the
    forward's thread raised ``recompile_limit`` to 64, SAC checkpoint, a guarded global flips before
    ``backward()``, which runs on a second thread (the CPU stand-in for CUDA's autograd worker).
    Observed: SAC's "not found in storage" (the recompute read the default limit, fell back to eager),
    or gradients other than the un-checkpointed eager reference's (the largest difference); not
    observed: the gradients match it."""
    _cpu_only()
    from torchfix_sac_replay.reproduction_sac_replay import run_scenario

    r = run_scenario(["guard_miss"])
    if not r["ok"]:
        if NOT_IN_STORAGE not in r["error"]:
            raise RuntimeError(f"guard_miss failed otherwise than the bug: {_error(r)[:300]}")
        # the first sentence: "aten.mm.default encountered during backward[,] but not found in storage"
        return observed(_error(r).split(". ")[0][:200])
    if not r["grad_match"]:
        return observed(
            f"gradients differ from the un-checkpointed eager reference (max abs error {r['grad_error']:.3g})"
        )
    return not_observed(
        "backward on a second thread after a recompute-time guard miss: gradients match the "
        f"un-checkpointed eager reference (max abs error {r['grad_error']:.2g})"
    )


def backward_context() -> Outcome:
    """backward-context's reproduction (pytorch#185372): region A's compiled backward on the calling
    thread, region B's on a second device's autograd thread (torch's Python ``PrivateUse1`` backend
    stands in for a GPU), both inside their compiled bodies at once. Observed: "cannot enter context
    ... is already entered"; not observed: both ran at once on two threads with the right gradient.

    The scenario runs in its own interpreter (the environment's switches are inherited, so the fix is
    on or off there as here): it registers a device backend for the whole process, and the engine's
    parked device thread can abort the interpreter's teardown. ``torch._dynamo`` (the fix's trigger)
    is imported here too, which settles the fix's state in this interpreter, reported beside the
    outcome."""
    import importlib

    import torch

    if not hasattr(importlib.import_module("torch.utils.backend_registration"), "_DummyBackendModule"):
        return cannot_run(
            f"torch {torch.__version__} has no Python device backend (_DummyBackendModule) to stand in "
            "for the second device"
        )
    import torch._dynamo  # noqa: F401 - the fix's trigger

    here = _state("backward-context")
    r = _in_own_interpreter(["-m", "torchfix_sac_replay.reproduction_backward_context", "--timeout", "10"])
    if r["backward-context"] != here:
        raise RuntimeError(f"the scenario's interpreter has the fix {r['backward-context']}, this one {here}")
    if not r["ok"]:
        if ALREADY_ENTERED not in r["error"]:
            raise RuntimeError(f"the concurrent backward failed otherwise than the bug: {_error(r)[:300]}")
        return observed(re.sub(r"0x[0-9a-fA-F]+", "0x...", _error(r))[:200])
    threads = {row["thread"] for row in r["seen"]}
    if len(r["seen"]) != 2 or len(threads) != 2:
        raise RuntimeError(f"the two compiled backwards did not run on two threads: {r['seen']}")
    if not r["grad_ok"]:
        raise RuntimeError("both compiled backwards ran, but the gradient is not 5 * cos(x)")
    saw = sum(row["var"] == "set-before-backward" for row in r["seen"])
    return not_observed(
        "2 compiled backwards ran at once on 2 threads (calling thread, second device's autograd thread); "
        f"gradient 5 * cos(x); the ContextVar set before backward() seen on {saw} of 2 threads"
    )


def sac_storage_key() -> Outcome:
    """sac-storage-key's reproduction (pytorch#175258): upstream's regression test
    ``test_sac_cached_value_fifo_mismatch`` (a 1-rank fake process group, a compiled ``arange`` cached
    in a dict, so the recompute skips that compiled region; SAC saves ``inductor_compiled_code``).
    Observed: the error SAC's mix-up raises in the recompute, or a gradient other than the
    un-checkpointed program's (the largest difference); not observed: backward completes with it."""
    _cpu_only()
    import torch._higher_order_ops.wrap as wrap

    if not hasattr(wrap, "inductor_compiled_code"):
        import torch

        return cannot_run(
            f"torch {torch.__version__} has no inductor_compiled_code (compiled regions never reach "
            "selective checkpointing as one op)"
        )
    from torchfix_sac_replay.reproduction_sac_storage_key import run_scenario

    r = run_scenario("upstream")
    if not r["ok"]:
        kind = r["error_type"].rsplit(".", 1)[-1]
        if STORAGE_KEY_ERRORS.get(kind, "\0") not in r["error"] or "recompute_fn" not in r["traceback"]:
            raise RuntimeError(f"upstream's test failed otherwise than the bug: {_error(r)[:300]}")
        return observed(f"{_error(r)[:200]} (in the checkpoint's recompute)")
    if not r["grad_match"]:
        return observed(f"gradient differs from the un-checkpointed program's (max abs error {r['grad_error']:.3g})")
    return not_observed(
        f"backward completes; gradient equals the un-checkpointed program's (max abs error {r['grad_error']:.2g})"
    )


def _state(fix_id: str) -> str:
    import torchfix_core

    return next((str(r.state) for r in torchfix_core.status() if r.id == fix_id), "not-installed")


def _in_own_interpreter(argv: list[str]) -> dict[str, Any]:
    """``python ARGV`` in a fresh interpreter with this environment (torchfix's switches included)
    and no GPU; the JSON object its last stdout line holds."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return dict(json.loads(lines[-1]))
