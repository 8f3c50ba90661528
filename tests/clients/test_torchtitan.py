"""torchfix under torchtitan 0.3.0: does no harm in torchtitan's own ordering, repairs prime-rl's.

Every job is ``titan_job.py`` in a fresh interpreter (see its docstring for the glue), under the
same conditions: its own empty ``TORCHINDUCTOR_CACHE_DIR`` (every run compiles cold, none can load
what another stored), ``PYTHONHASHSEED=0``, one intra-op thread per rank and deterministic
algorithms (the job's CPU defaults), so that torchfix is the only difference between the on and
off runs and their losses can be compared bit for bit. Needs
torchtitan (``nox -s clients`` installs it with the few modules its model code imports); skipped
elsewhere. Costs about 4-6 minutes on a 2-core box (two 2-rank jobs, two one-rank jobs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torchtitan", reason="torchtitan is not installed (nox -s clients installs it)")

pytestmark = pytest.mark.slow
JOB = Path(__file__).with_name("titan_job.py")
TITAN_STEPS = 8
EAGER_CKPT_STEPS = 8


def _job(tmp_path_factory: pytest.TempPathFactory, *args: str, disable: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCHINDUCTOR_"))}
    env.update(
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path_factory.mktemp("inductor-cache")),  # empty: a cold compile
        PYTHONHASHSEED="0",
    )
    if disable is not None:
        env["TORCHFIX_DISABLE"] = disable
    proc = subprocess.run([sys.executable, str(JOB), *args], env=env, capture_output=True, text=True, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}")
    return json.loads(lines[-1])


def _job_fixture(name: str, *args: str, disable: str | None) -> Any:
    """A module-scoped fixture ``name``: one run of the job with ``args`` (torchfix on, or ``disable``)."""

    @pytest.fixture(scope="module", name=name)
    def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        return _job(tmp_path_factory, *args, disable=disable)

    return run


titan_on = _job_fixture("titan_on", "--spawn", "2", "--steps", str(TITAN_STEPS), disable=None)
titan_off = _job_fixture("titan_off", "--spawn", "2", "--steps", str(TITAN_STEPS), disable="all")
eager_ckpt_on = _job_fixture(
    "eager_ckpt_on", "--ordering", "eager-ckpt", "--steps", str(EAGER_CKPT_STEPS), disable=None
)
eager_ckpt_off = _job_fixture(
    "eager_ckpt_off", "--ordering", "eager-ckpt", "--steps", str(EAGER_CKPT_STEPS), disable="all"
)


def test_titan_job_trains_with_torchfix_active(titan_on: dict[str, Any]) -> None:
    assert titan_on["error"] is None, titan_on
    assert len(titan_on["losses"]) == TITAN_STEPS and titan_on["world"] == 2
    active = {k for k, v in titan_on["torchfix"].items() if v == "applied"}
    assert "sac-replay" in active and "placement-cache" in active, titan_on["torchfix"]


def test_titan_losses_bit_identical_with_and_without_torchfix(
    titan_on: dict[str, Any], titan_off: dict[str, Any]
) -> None:
    assert titan_off["error"] is None, titan_off
    assert set(titan_off["torchfix"].values()) <= {"disabled", "not-installed"}, titan_off["torchfix"]
    for report in (titan_on, titan_off):
        assert report["intra_op_threads"] == 1 and report["deterministic"], report
    assert titan_on["losses_hex"] == titan_off["losses_hex"]
    assert titan_on["grad_norms_hex"] == titan_off["grad_norms_hex"]
    ratio = titan_on["median_step_s"] / titan_off["median_step_s"]
    print(
        f"\ntorchtitan debugmodel, 2 gloo ranks, {TITAN_STEPS} steps: median step (steps 3+) "
        f"on {titan_on['median_step_s'] * 1e3:.0f} ms, off {titan_off['median_step_s'] * 1e3:.0f} ms, "
        f"ratio on/off {ratio:.3f}; first-step (compile) on {titan_on['step_s'][0]:.1f} s, "
        f"off {titan_off['step_s'][0]:.1f} s; peak RSS rank 0 on {titan_on['peak']['max_rss_mib']:.0f} MiB, "
        f"off {titan_off['peak']['max_rss_mib']:.0f} MiB"
    )


def _sac_replay_bug_here(report: dict[str, Any]) -> bool:
    return report["torchfix"].get("sac-replay") == "applied"


def test_eager_checkpoint_around_compiled_titan_block_fails_without_torchfix(
    eager_ckpt_on: dict[str, Any], eager_ckpt_off: dict[str, Any]
) -> None:
    if not _sac_replay_bug_here(eager_ckpt_on):
        pytest.skip(f"sac-replay is {eager_ckpt_on['torchfix'].get('sac-replay')} on this torch: no bug to show")
    assert eager_ckpt_off["torchfix"].get("sac-replay") == "disabled"
    # the recompute on the worker thread runs under torch's default recompile_limit and fails
    assert eager_ckpt_off["error"] is not None, eager_ckpt_off
    assert "RecompileLimit" in eager_ckpt_off["error"] or "recompile" in eager_ckpt_off["error"].lower()
    assert eager_ckpt_off["recompile_limit_hits"] >= 1
    assert len(eager_ckpt_off["losses"]) < EAGER_CKPT_STEPS


def test_eager_checkpoint_around_compiled_titan_block_passes_with_torchfix(
    eager_ckpt_on: dict[str, Any], eager_ckpt_off: dict[str, Any]
) -> None:
    assert eager_ckpt_on["error"] is None, eager_ckpt_on
    assert len(eager_ckpt_on["losses"]) == EAGER_CKPT_STEPS
    assert eager_ckpt_on["recompile_limit_hits"] == 0
    for report in (eager_ckpt_on, eager_ckpt_off):
        assert report["intra_op_threads"] == 1 and report["deterministic"], report
        assert report["backward_thread_intra_op_threads"] == [1], report
    # the steps the unfixed run completed are bit-identical (losses and gradient norms)
    done = len(eager_ckpt_off["losses"])
    assert done >= 2, eager_ckpt_off
    assert eager_ckpt_on["losses_hex"][:done] == eager_ckpt_off["losses_hex"]
    assert eager_ckpt_on["grad_norms_hex"][:done] == eager_ckpt_off["grad_norms_hex"]
