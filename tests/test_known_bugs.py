"""Investigated bugs without a fix are named from their real red output (docs/investigated.md).

Each reproduction is a user's script run as a user runs it; its stderr is the log explain reads,
where only a copy of torchfix_core is importable (no fix, no torch): explain names the bug as
``no fix`` with its workaround. Where a release does not have the bug, the test skips and says so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from torchfix_core._known_bugs import KNOWN_BUGS
from torchfix_core.testing import clean_environ, explain_json

TORCH = Version(Version(torch.__version__).base_version)

ACT_RECOMPILE = textwrap.dedent(
    """
    import os, torch, torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = "29743"
    dist.init_process_group("gloo", rank=0, world_size=1)

    @torch.compile(backend="eager", fullgraph=True)
    def f(w0, w1, w2, w3):
        return (w0 * 2 + w1 * 3 + w2 * 4 + w3 * 5).sum()

    base = [torch.randn(4) for _ in range(4)]
    for i in range(16):  # the first call has plain tensors only: every release read recompiles
        f(*[funcol.all_gather_tensor(b, 0, dist.group.WORLD) if (i >> k) & 1 else b.clone() for k, b in enumerate(base)])
    print("all 16 calls ran")
    """
)

CHECKPOINT_DEVICE_CTX = textwrap.dedent(
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    def body(x):
        return x * torch.ones(3)

    # a first checkpoint outside the device context, as a training loop has run before: on torch 2.8
    # the first call imports torch._dynamo, and that import fails under `with torch.device("meta")`
    # (a circular import, another bug, docs/investigated.md)
    checkpoint(body, torch.ones(3, requires_grad=True), use_reentrant=False).sum().backward()
    with torch.device("meta"):
        x = torch.randn(3, device="meta", requires_grad=True)
        y = checkpoint(body, x, use_reentrant=False)
    y.sum().backward()
    print("backward ran")
    """
)


def red_log(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_environ(), timeout=600
    )
    if proc.returncode == 0:
        pytest.skip(f"torch {torch.__version__} does not show the bug here: {proc.stdout.strip()[-200:]}")
    return proc.stderr


def wording_seen_on(bug_id: str) -> SpecifierSet:
    """The torch releases where the bug's signature says its wording was seen (its ``releases``)."""
    (entry,) = [bug for bug in KNOWN_BUGS if bug["id"] == bug_id]
    releases = {sig["releases"] for sig in entry["signatures"]}
    assert len(releases) == 1 and next(iter(releases)).startswith("torch "), releases
    return SpecifierSet(next(iter(releases)).removeprefix("torch "))


def assert_named(log: str, bug_id: str) -> None:
    report = explain_json(log, isolated=True)
    named = {m["id"]: m for m in report["matches"]}
    assert bug_id in named, f"explain named {sorted(named)}; log tail:\n{log[-2500:]}"
    assert named[bug_id]["state"] == "no fix" and "workaround" in named[bug_id]["advice"]


def test_act_recompile_red_run_is_named() -> None:
    log = red_log(ACT_RECOMPILE)
    if TORCH not in wording_seen_on("act-recompile"):
        # torch 2.8/2.9 recompile too, but their reason reads `___check_type_id(w0, <id>)`, which names
        # no type: nothing in the log tells this bug from any recompile limit, so explain claims nothing
        assert "___check_type_id" in log and "AsyncCollectiveTensor" not in log, log[-2500:]
        assert "act-recompile" not in {m["id"] for m in explain_json(log, isolated=True)["matches"]}
        return
    assert_named(log, "act-recompile")


@pytest.mark.skipif(TORCH >= Version("2.11"), reason="fixed in torch 2.11 (pytorch PR #172802): no red run")
def test_checkpoint_device_ctx_red_run_is_named() -> None:
    assert_named(red_log(CHECKPOINT_DEVICE_CTX), "checkpoint-device-ctx")
