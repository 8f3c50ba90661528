"""torchfix under Hugging Face transformers: FSDP2 mixed precision + gradient checkpointing (fsdp-recompute-cast).

Every job is ``hf_job.py`` (see its docstring) in a fresh interpreter through the kit's
``run_json_script``, 2 gloo ranks on the CPU, under the same conditions: its own empty
``TORCHINDUCTOR_CACHE_DIR``, ``PYTHONHASHSEED=0``, one intra-op thread per rank and deterministic
algorithms, so that torchfix is the only difference between the on and off runs. transformers'
``LlamaForCausalLM`` from a small config (random weights), ``gradient_checkpointing_enable``
(non-reentrant), ``fully_shard`` per decoder layer and on the root with bf16 parameters / fp32
reduce, the token embedding kept in fp32 (``--embedding fp32``), AdamW.

Where torch drops the cast in the recompute (``fsdp-recompute-cast`` is ``applied``: torch 2.8-2.12)
the job fails at its first backward without torchfix and trains with it, and its losses equal bit for
bit those of the same job without gradient checkpointing (a recompute that reproduces the forward
changes nothing). Where the fix is not needed (2.13+) the losses with and without torchfix are
bit-identical. The stock placement (the embedding in the root's bf16 unit) is the control: no fp32
reaches a layer and it trains without torchfix on every release.

Needs transformers <= 5.22 (``nox -s clients`` pins 5.22.2): from 5.23 transformers checkpoints the
layer's ``forward`` inside FSDP's hooks, so the saved inputs are already cast and the bug is not
reached. Skipped without transformers. About 4-5 minutes on a 2-core box (five 2-rank jobs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import run_json_script

pytest.importorskip("transformers", reason="transformers is not installed (nox -s clients installs it)")

pytestmark = pytest.mark.slow
JOB = Path(__file__).with_name("hf_job.py")
STEPS = 4
FIX = "fsdp-recompute-cast"
# what the recompute's float32 activations meet first, per model and release: SDPA's dtype check
# (float32 query/key after the fp32 rotary cos/sin, bfloat16 value), a matmul, or checkpoint's own
# metadata check
DTYPE_ERRORS = ("must have the same dtype", "to have the same dtype", "CheckpointError")


def _job(tmp_path_factory: pytest.TempPathFactory, *args: str, disable: str | None) -> dict[str, Any]:
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("inductor-cache")),  # empty: a cold compile
        "PYTHONHASHSEED": "0",
    }
    if disable is not None:
        env["TORCHFIX_DISABLE"] = disable
    return run_json_script([JOB, "--spawn", "2", "--steps", str(STEPS), *args], env=env, timeout=1800)


def _job_fixture(name: str, *args: str, disable: str | None) -> Any:
    """A module-scoped fixture ``name``: one run of the job with ``args`` (torchfix on, or ``disable``)."""

    @pytest.fixture(scope="module", name=name)
    def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        report = _job(tmp_path_factory, *args, disable=disable)
        print(f"\n{name}: {_summary(report)}")  # the figures docs/clients.md records (pytest -s)
        return report

    return run


def _summary(report: dict[str, Any]) -> str:
    """One line: torch, the fix's state, the error or the losses, the median step and peak RSS."""
    head = f"torch {report['torch']}, {FIX} {_state(report)}"
    if report["error"] is not None:
        return f"{head}: {report['error'][:200]}"
    losses, median = report["losses"], report["median_step_s"]
    return (
        f"{head}: {len(losses)} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f} ({report['losses_hex'][-1]}), "
        f"median step (2+) {median * 1e3:.0f} ms, first {report['step_s'][0] * 1e3:.0f} ms, "
        f"peak RSS per rank {[round(x) for x in report['peak_rss_mib_per_rank']]} MiB"
    )


hf_on = _job_fixture("hf_on", disable=None)
hf_off = _job_fixture("hf_off", disable="all")
hf_reference = _job_fixture("hf_reference", "--no-checkpointing", disable="all")
# aot_eager: Dynamo and AOTAutograd trace each layer (the recompute retraces with fp32 inputs and
# fails there without the fix), at a fraction of Inductor's compile time on a CPU
COMPILE = ("--compile", "--backend", "aot_eager")
hf_compiled_on = _job_fixture("hf_compiled_on", *COMPILE, disable=None)
hf_compiled_off = _job_fixture("hf_compiled_off", *COMPILE, disable="all")
hf_shared_off = _job_fixture("hf_shared_off", "--embedding", "shared", disable="all")


def _state(report: dict[str, Any]) -> str:
    return str(report["torchfix"].get(FIX, "not-installed"))


def _require_bug(on: dict[str, Any]) -> None:
    """Skip unless the bug exists here: the fix applied (its probe found the cast missing) and this
    transformers checkpoints the layer's ``__call__``."""
    if not on["checkpoint_wraps_call"]:
        pytest.skip(f"transformers {on['transformers']} checkpoints forward inside FSDP's hooks: bug not reached")
    if _state(on) != "applied":
        pytest.skip(f"{FIX} is {_state(on)} on torch {on['torch']}: no bug to show")


def _assert_conditions(*reports: dict[str, Any]) -> None:
    for report in reports:
        assert report["world"] == 2 and report["backend"] == "gloo", report
        assert report["intra_op_threads"] == 1 and report["deterministic"], report


def _assert_red(off: dict[str, Any]) -> None:
    assert _state(off) == "disabled", off["torchfix"]
    assert off["error"] is not None, off
    assert off["error"].startswith("step 0: "), off["error"]  # the first backward
    text = f"{off['error']}\n{off['error_detail']}"  # compiled: the dtype error is under Dynamo's first line
    assert any(marker in text for marker in DTYPE_ERRORS), text
    assert off["losses"] == [], off


def _assert_same_bits(run: dict[str, Any], reference: dict[str, Any]) -> None:
    """Every step's loss and gradient norm of ``run`` is bit for bit ``reference``'s (hex floats)."""
    assert run["losses_hex"] == reference["losses_hex"], (run["losses"], reference["losses"])
    assert run["grad_norms_hex"] == reference["grad_norms_hex"]


def test_hf_fsdp_mixed_precision_checkpointing_fails_without_torchfix(
    hf_on: dict[str, Any], hf_off: dict[str, Any]
) -> None:
    _require_bug(hf_on)
    _assert_conditions(hf_off)
    _assert_red(hf_off)


def test_hf_fsdp_mixed_precision_checkpointing_trains_with_torchfix(
    hf_on: dict[str, Any], hf_reference: dict[str, Any]
) -> None:
    _assert_conditions(hf_on, hf_reference)
    assert hf_on["error"] is None, hf_on
    assert len(hf_on["losses"]) == STEPS, hf_on
    assert _state(hf_on) in ("applied", "not-needed", "out-of-range"), hf_on["torchfix"]
    # the recompute reproduces the forward: the same losses and gradient norms as without checkpointing
    assert hf_reference["error"] is None and not hf_reference["checkpointing"], hf_reference
    _assert_same_bits(hf_on, hf_reference)
    print(
        f"\ntransformers {hf_on['transformers']} Llama, torch {hf_on['torch']}, {FIX} {_state(hf_on)}: "
        f"losses {hf_on['losses'][0]:.6f} -> {hf_on['losses'][-1]:.6f}, median step "
        f"{hf_on['median_step_s'] * 1e3:.0f} ms (no checkpointing {hf_reference['median_step_s'] * 1e3:.0f} ms), "
        f"peak RSS per rank {hf_on['peak_rss_mib_per_rank']} MiB"
    )


def test_hf_compiled_layers_fail_without_torchfix(
    hf_compiled_on: dict[str, Any], hf_compiled_off: dict[str, Any]
) -> None:
    _require_bug(hf_compiled_on)
    _assert_conditions(hf_compiled_off)
    _assert_red(hf_compiled_off)


def test_hf_compiled_layers_train_with_torchfix(hf_compiled_on: dict[str, Any], hf_on: dict[str, Any]) -> None:
    _assert_conditions(hf_compiled_on)
    assert hf_compiled_on["error"] is None, hf_compiled_on
    assert len(hf_compiled_on["losses"]) == STEPS and hf_compiled_on["compile"] == "aot_eager", hf_compiled_on
    # aot_eager runs the traced aten graph eagerly: the eager job's losses (the same bits on torch
    # 2.10-2.15; on 2.8.0 and 2.9.1 the traced bf16 graph rounds apart, by up to 4e-5 relative: the
    # runs are deterministic, so 1e-4 holds with room and still fails any real divergence)
    for compiled, eager in zip(hf_compiled_on["losses"], hf_on["losses"]):
        assert compiled == pytest.approx(eager, rel=1e-4, abs=0), (hf_compiled_on["losses"], hf_on["losses"])


def test_hf_losses_bit_identical_where_not_needed(hf_on: dict[str, Any], hf_off: dict[str, Any]) -> None:
    if _state(hf_on) == "applied":
        pytest.skip(f"{FIX} is applied on torch {hf_on['torch']}: the unfixed job fails (see the red test)")
    if _state(hf_on) == "not-installed":
        pytest.skip(f"torchfix-fsdp-recompute is not installed: {hf_on['torchfix']}")
    _assert_conditions(hf_on, hf_off)
    assert _state(hf_on) in ("not-needed", "out-of-range"), hf_on["torchfix"]
    assert _state(hf_off) == "disabled", hf_off["torchfix"]
    assert hf_on["error"] is None and hf_off["error"] is None, (hf_on["error"], hf_off["error"])
    _assert_same_bits(hf_on, hf_off)
    print(
        f"\ntorch {hf_on['torch']} ({FIX} {_state(hf_on)}): median step on "
        f"{hf_on['median_step_s'] * 1e3:.0f} ms, off {hf_off['median_step_s'] * 1e3:.0f} ms; peak RSS rank 0 "
        f"on {hf_on['peak_rss_mib_per_rank'][0]:.0f} MiB, off {hf_off['peak_rss_mib_per_rank'][0]:.0f} MiB"
    )


def test_hf_stock_placement_trains_without_torchfix(hf_shared_off: dict[str, Any]) -> None:
    # the control: with the embedding in the root's bf16 unit no fp32 reaches a layer, nothing to cast
    _assert_conditions(hf_shared_off)
    assert hf_shared_off["error"] is None, hf_shared_off
    assert len(hf_shared_off["losses"]) == STEPS
