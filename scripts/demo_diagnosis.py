"""Demo section for ``nox -s demo``: a failing job explained, then the same job green with its report.

    python scripts/demo_diagnosis.py

The job is a user's script, run as a user runs it (``python job.py``, two "ranks" one after the
other with ``RANK`` set): pytorch#166926's shape, two activation-checkpointed blocks calling one
``torch.compile``'d function with 4 and 6 rows (``aot_eager``), then backward.

1. Red: with ``TORCHFIX_DISABLE=recompute-cache`` the recompute picks the dynamic graph and the job
   dies with ``CheckpointError``; torchfix's note follows the traceback on stderr. The demo keeps
   both ranks' stderr in one log, each line prefixed ``[rankN]:`` as torchrun prints it.
2. ``torchfix-doctor explain job.log``, in the job's environment: the bug, the fix, its state
   there (disabled, and by what).
3. Green: the same job with torchfix as installed and ``TORCHFIX_REPORT=<dir>``; then
   ``torchfix-doctor report <dir>``: which fixes acted on which rank, and how often.

Four fresh interpreters (about 20-40 s each on a loaded 2-core VM). Prints what it ran and the
tools' own output; exits 0 whatever the job did (a demo reports).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

JOB = textwrap.dedent(
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)

    @torch.compile(backend="aot_eager")
    def block(x, w):
        h = torch.sin(x @ w)
        return torch.cos(h) * h.sum(0)

    w = torch.randn(8, 8, requires_grad=True)
    x1, x2 = torch.randn(4, 8, requires_grad=True), torch.randn(6, 8, requires_grad=True)
    loss = checkpoint(block, x1, w, use_reentrant=False).sum() + checkpoint(block, x2, w, use_reentrant=False).sum()
    loss.backward()
    print(f"step done: loss {loss.item():.6f}, |grad w| {w.grad.norm().item():.6f}")
    """
)


def environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFIX_")}
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update(extra)
    return env


def run_job(job: Path, rank: int, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, env=environ(RANK=str(rank), WORLD_SIZE="2", **extra)
    )


def doctor(*args: str, **extra: str) -> None:
    shown = " ".join(f"{k}={v}" for k, v in extra.items())
    print(f"$ {shown + ' ' if shown else ''}torchfix-doctor {' '.join(args)}")
    proc = subprocess.run(
        [sys.executable, "-m", "torchfix_core", *args], capture_output=True, text=True, env=environ(**extra)
    )
    print(textwrap.indent(proc.stdout.rstrip() or proc.stderr.rstrip(), "  "))
    print(f"  (exit status {proc.returncode})")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="torchfix-demo-") as tmp:
        folder = Path(tmp)
        job = folder / "job.py"
        job.write_text(JOB)
        print("== diagnosis: a failing job explained, then the same job green with its report ==")
        print("  1. the job with TORCHFIX_DISABLE=recompute-cache, ranks 0 and 1, stderr kept in job.log:")
        log_lines = []
        for rank in (0, 1):
            proc = run_job(job, rank, TORCHFIX_DISABLE="recompute-cache")
            log_lines += [f"[rank{rank}]: {line}" for line in proc.stderr.splitlines()]
            tail = [line for line in proc.stderr.splitlines() if line.strip()][-3:]
            print(f"     rank {rank}: exit {proc.returncode}; stderr ends with:")
            print(textwrap.indent("\n".join(tail), "       "))
        log = folder / "job.log"
        log.write_text("\n".join(log_lines) + "\n")
        print("  2. what the log says, asked in the job's environment:")
        doctor("explain", str(log), TORCHFIX_DISABLE="recompute-cache")
        reports = folder / "reports"
        print("  3. the same job, torchfix as installed, TORCHFIX_REPORT set:")
        for rank in (0, 1):
            proc = run_job(job, rank, TORCHFIX_REPORT=str(reports))
            print(
                f"     rank {rank}: exit {proc.returncode}: {(proc.stdout.strip().splitlines() or ['(no output)'])[-1]}"
            )
        doctor("report", str(reports))


if __name__ == "__main__":
    main()
