"""explain names the fix in the red runs of real clients, in each form a user has them.

Each client (``CLIENTS``) is a job that drives a framework's own code and fails of one bug where that
bug exists, run with ``--raise`` and the fix off:

* transformers (``hf_job.py``: transformers' own ``LlamaForCausalLM`` / ``Qwen3ForCausalLM``, random
  weights, ``gradient_checkpointing_enable(use_reentrant=False)``, ``fully_shard`` per decoder layer
  with bf16 ``param_dtype``; SDPA and eager attention, a compiled layer): ``fsdp-recompute-cast``,
  where it applies (torch 2.8-2.12) and transformers checkpoints the layer's ``__call__`` (<= 5.22.2);
* torchtitan (``titan_job.py --ordering eager-ckpt``: each torchtitan block compiled with
  ``fullgraph=True``, then wrapped in torchtitan's ``SelectiveAC``; one process): ``sac-replay``, whose
  recompute on the backward's thread meets torch's default ``recompile_limit`` (torch >= 2.12);
* transformers-sac-replay (``hf_job.py --no-fsdp --compile --fullgraph ...``: transformers' own Llama,
  each decoder layer compiled with ``fullgraph=True`` inside transformers' own non-reentrant gradient
  checkpoint, the backward on a worker thread, an emulated training-state flag; one process):
  ``sac-replay``, the same ordering and failure as torchtitan's, from a second model family;
* transformers-recompute-cache (``hf_job.py --no-fsdp --compile --pair``: transformers' own Mamba2 and
  Bamba (a hybrid of Mamba2 and attention layers), each decoder layer compiled inside transformers' own
  non-reentrant gradient checkpoint, two forwards of different lengths before one backward; one
  process per rank): ``recompute-cache``, the second forward's dynamic graph picked by the first
  forward's recompute (torch 2.10-2.15 with the fix, the bug on every release);
* transformers-recompute-unshard (``hf_job.py --shard-child self_attn --pair``: transformers' own Llama
  and Qwen3-MoE under FSDP2, the attention of each decoder layer a ``fully_shard`` unit of its own inside
  the layer's unit and its gradient checkpoint, two forwards before one backward; one process per
  rank): ``fsdp-recompute-unshard``, the first forward's recompute on the attention's resharded
  parameters (torch 2.8-2.10).

The failure is taken in three forms:

* ``single``: one process (``WORLD_SIZE=1``), its stderr as Python prints the uncaught exception;
* ``torchrun``: ``python -m torch.distributed.run``: each rank's ``[rankN]:`` prefixed traceback,
  interleaved, and torchrun's ``ChildFailedError`` summary;
* ``error.json``: rank 0's torchelastic error file from torchrun's ``--log-dir`` (``record``).

Each is fed to ``torchfix-doctor explain --json`` twice: where only the core and the family catalog
are importable (no torch: ``not-installed``), and in this environment with the fix turned off
(``disabled``). The controls raise the same messages outside the bug's context (transformers:
``--output-fp32`` on every unit, the root's ``lm_head`` gets float32 in the *forward*; torchtitan: a
training-thread ``recompile_limit`` of 4, hit in the *forward*, for torchtitan's and transformers'
sac-replay jobs alike; recompute-cache: Bamba uncompiled, its attention implementation switched to
eager between forward and backward, so the recompute of eager code saves other tensors;
recompute-unshard: the root's embedding called outside its FSDP unit before the first forward, the
DTensor message from the forward): never claimed.
``TORCHFIX_CORPUS_DIR=DIR`` also records each input into ``DIR/<fix id>/`` with its expectation
(``MANIFEST.json``), paths made neutral: that is how ``tests/corpus/`` was made, which
``tests/test_explain_corpus.py`` replays in CI (``nox -s clients_corpus`` records transformers on
the releases with the bug; ``nox -s clients`` runs torchtitan's on the default torch). About 5
minutes per client on a 2-core machine.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import assert_explained_both_ways, clean_environ, explain_json

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
HF_FIX = "fsdp-recompute-cast"
SAC_REPLAY_FIX = "sac-replay"
RECOMPUTE_CACHE_FIX = "recompute-cache"
UNSHARD_FIX = "fsdp-recompute-unshard"
#: hf_job.py's fsdp-recompute-unshard ordering: FSDP2 per decoder layer with each layer's self_attn a
#: nested unit, bf16 everywhere (the cast bug stays out), two forwards before one backward (see hf_job.py)
HF_UNSHARD = ("--embedding", "shared", "--shard-child", "self_attn", "--steps", "1")
#: hf_job.py's recompute-cache ordering: no FSDP, each decoder layer compiled (automatic dynamic shapes)
#: inside transformers' checkpoint, two forwards of 32 and 48 tokens before one backward (see hf_job.py)
HF_RECOMPUTE_CACHE = ("--no-fsdp", "--compile", "--backend", "aot_eager", "--pair", "--steps", "2")
#: hf_job.py's sac-replay ordering: no FSDP, each decoder layer compiled (fullgraph, static shapes) inside
#: transformers' checkpoint, the training thread's recompile_limit, a new sequence length every step, the
#: emulated training-state flag, the backward on a worker thread (see hf_job.py's docstring)
HF_SAC_REPLAY = (
    *("--no-fsdp", "--compile", "--backend", "aot_eager", "--fullgraph"),
    *("--vary-seq", "--phase-flag", "--backward-thread", "--steps", "8"),
)


@dataclasses.dataclass(frozen=True)
class Client:
    """A client job whose red run one fix repairs: the cases that fail of the bug, the controls that
    raise the same messages outside it, how many torchrun ranks, what must be importable."""

    name: str
    job: Path
    fix: str
    red: dict[str, list[str]]
    controls: dict[str, list[str]]
    ranks: int
    needs: str
    distributed: bool = True  # the job calls init_process_group (the single form gets a 1-rank world)
    control_message: str = ""  # what a control's failure must print (the message the red runs share)

    def version(self) -> str:
        return f"{self.needs} {importlib.metadata.version(self.needs)}"


CLIENTS = {
    "transformers": Client(
        name="transformers",
        job=HERE / "hf_job.py",
        fix=HF_FIX,
        red={
            "llama-sdpa-root-without-policy": ["--embedding", "shared", "--root-policy", "none"],
            "llama-eager-root-without-policy": ["--attn", "eager", "--embedding", "shared", "--root-policy", "none"],
            "qwen3-sdpa-fp32-embedding": ["--model", "qwen3"],
            "llama-compiled-root-without-policy": [
                *("--compile", "--backend", "aot_eager", "--embedding", "shared", "--root-policy", "none"),
            ],
        },
        # output_dtype=float32 on every unit reaches the root's bf16 lm_head in the *forward*: an
        # ordinary configuration error with the same messages, which torchfix does not repair
        controls={
            "llama-sdpa-output-fp32-forward": ["--embedding", "shared", "--output-fp32"],
            "qwen3-eager-output-fp32-forward": [
                *("--model", "qwen3", "--attn", "eager", "--embedding", "shared", "--output-fp32"),
            ],
        },
        ranks=2,
        needs="transformers",
        control_message=r"to have the same dtype|must have the same dtype",
    ),
    # prime-rl's ordering (each block compiled, then wrapped in torchtitan's SelectiveAC), a guard miss
    # in the recompute, the backward on another thread: the recompute reads torch's default
    # recompile_limit (8), not the training thread's 64, and fullgraph=True fails there
    "torchtitan": Client(
        name="torchtitan",
        job=HERE / "titan_job.py",
        fix=SAC_REPLAY_FIX,
        red={"eager-ckpt-recompile-limit-in-recompute": ["--ordering", "eager-ckpt", "--steps", "8"]},
        # a training-thread limit of 4: the forward of step 3 meets 4 entries (each step adds the forward's
        # and the recompute's) and fails there, in the forward, with the same message: not this bug
        controls={
            "eager-ckpt-recompile-limit-in-forward": [
                "--ordering",
                "eager-ckpt",
                "--steps",
                "8",
                "--recompile-limit",
                "4",
            ]
        },
        ranks=1,
        needs="torchtitan",
        distributed=False,
        control_message=r"Hard failure due to fullgraph=True|fail_on_recompile_limit_hit",
    ),
    # the same ordering from transformers' own pieces: its GradientCheckpointingLayer checkpoints each
    # decoder layer compiled with fullgraph=True; the recompute on the backward's thread reads the default
    # recompile_limit (8) and fails at step 4, when each layer holds 8 entries
    "transformers-sac-replay": Client(
        name="transformers-sac-replay",
        job=HERE / "hf_job.py",
        fix=SAC_REPLAY_FIX,
        red={"llama-compiled-layers-recompile-limit-in-recompute": [*HF_SAC_REPLAY, "--recompile-limit", "64"]},
        # a training-thread limit of 4: the forward of step 2 meets 4 entries and fails there, inside
        # transformers' checkpoint but not in its recompute, with the same message: not this bug
        controls={"llama-compiled-layers-recompile-limit-in-forward": [*HF_SAC_REPLAY, "--recompile-limit", "4"]},
        ranks=1,
        needs="transformers",
        control_message=r"Hard failure due to fullgraph=True|fail_on_recompile_limit_hit",
    ),
    # each decoder layer compiled inside transformers' checkpoint; the pair's second forward (48 tokens)
    # recompiles the layers' code dynamic, which Dynamo's LRU puts first, and the backward recomputes the
    # first forward's layers (32 tokens) with it: Mamba2's chunked scan saves other tensors in that graph
    "transformers-recompute-cache": Client(
        name="transformers-recompute-cache",
        job=HERE / "hf_job.py",
        fix=RECOMPUTE_CACHE_FIX,
        red={
            "mamba2-compiled-layers-paired-lengths": ["--model", "mamba2", *HF_RECOMPUTE_CACHE],
            "bamba-compiled-layers-paired-lengths": ["--model", "bamba", *HF_RECOMPUTE_CACHE],
        },
        # the model changed between forward and backward (attention implementation set to eager), nothing
        # compiled: the recompute of eager code saves other tensors, the same error, not this bug
        controls={
            "bamba-eager-attention-switched-before-backward": [
                *("--model", "bamba", "--no-fsdp", "--switch-attn-before-backward", "--steps", "2"),
            ]
        },
        ranks=2,
        needs="transformers",
        control_message=r"Recomputed values for the following tensors have different metadata",
    ),
    # the attention a fully_shard unit inside each checkpointed decoder layer; the backward of the pair's
    # second forward reshards it and leaves its state PRE_BACKWARD, so the recompute of the first forward's
    # layer (started by the mlp's backward, before the attention's own pre-backward hook) skips the unshard
    "transformers-recompute-unshard": Client(
        name="transformers-recompute-unshard",
        job=HERE / "hf_job.py",
        fix=UNSHARD_FIX,
        red={
            "llama-nested-attention-unit-paired-forwards": [*HF_UNSHARD, "--pair"],
            "qwen3-moe-nested-attention-unit-paired-forwards": ["--model", "qwen3_moe", *HF_UNSHARD, "--pair"],
        },
        # the root's embedding called directly (inputs_embeds) before the root's first forward: its
        # parameters are sharded DTensors, the same message from the forward, no recompute
        controls={"llama-embedding-outside-its-unit": [*HF_UNSHARD, "--embed-outside"]},
        ranks=2,
        needs="transformers",
        control_message=r"got mixed torch\.Tensor and DTensor",
    ),
}
FORMS = ("single", "torchrun", "error.json")
STATE_PROBE = (
    "import sys, torch.distributed.fsdp, torch.utils.checkpoint, torchfix_core\n"
    "print(next((str(getattr(r.state, 'value', r.state)) for r in torchfix_core.status() if r.id == sys.argv[1]), "
    "'not-installed'))"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(client: Client, tmp: Path) -> dict[str, str]:
    env = clean_environ({"TORCHFIX_DISABLE": client.fix})
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"), PYTHONHASHSEED="0")
    return env


def _single(client: Client, args: list[str], tmp: Path) -> str:
    env = _env(client, tmp)
    if client.distributed:
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    proc = subprocess.run(
        [sys.executable, str(client.job), "--raise", *args], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode != 0, f"the job did not fail:\n{proc.stdout[-2000:]}"
    return proc.stderr


def _torchrun(client: Client, args: list[str], tmp: Path) -> tuple[str, str]:
    logs = tmp / "torchrun-logs"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(client.ranks)]
    command += ["--master-addr", "127.0.0.1", "--master-port", str(_free_port()), "--log-dir", str(logs)]
    proc = subprocess.run(
        [*command, str(client.job), "--raise", *args],
        env=_env(client, tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert proc.returncode != 0, f"the job did not fail:\n{proc.stdout[-2000:]}"
    (error_file,) = [p for p in logs.rglob("error.json") if p.parent.name == "0"]
    return proc.stdout, error_file.read_text(encoding="utf-8")


_forms: dict[tuple[str, str], dict[str, str]] = {}


def _case_forms(client: Client, name: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The failure of ``client``'s case ``name`` in each form (one single-process run, one torchrun run)."""
    args = {**client.red, **client.controls}[name]
    if (client.name, name) not in _forms:
        tmp = tmp_path_factory.mktemp(name)
        single = _single(client, args, tmp)
        log, error_json = _torchrun(client, args, tmp)
        _forms[client.name, name] = {"single": single, "torchrun": log, "error.json": error_json}
        _record(client, name, _forms[client.name, name])
    return _forms[client.name, name]


def _require_bug(client: Client) -> None:
    """Skip unless the bug exists here: the client is installed and the fix would apply."""
    pytest.importorskip(client.needs, reason=f"{client.needs} is not installed (nox -s clients)")
    if client.fix == HF_FIX:  # fsdp-recompute-cast needs the checkpoint around FSDP's hooks
        from transformers.modeling_layers import GradientCheckpointingLayer

        if "__call__" not in GradientCheckpointingLayer.__dict__:
            pytest.skip(f"{client.version()} checkpoints forward inside FSDP's hooks: no bug")
    probe = subprocess.run(
        [sys.executable, "-c", STATE_PROBE, client.fix],
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    state = probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else f"unknown ({probe.stderr[-300:]})"
    if state != "applied":
        pytest.skip(f"{client.fix} is {state} on torch {torch.__version__}: no red run to explain")


CASES = [(c.name, case) for c in CLIENTS.values() for case in sorted(c.red)]
CONTROLS = [(c.name, case) for c in CLIENTS.values() for case in sorted(c.controls)]


@pytest.mark.parametrize(("client_name", "name"), CASES)
def test_red_runs_are_explained_in_every_form(
    client_name: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    client = CLIENTS[client_name]
    _require_bug(client)
    forms = _case_forms(client, name, tmp_path_factory)
    for form in FORMS:
        assert_explained_both_ways(forms[form], client.fix, off={"TORCHFIX_DISABLE": client.fix})


@pytest.mark.parametrize(("client_name", "name"), CONTROLS)
def test_same_messages_outside_the_bug_are_not_claimed(
    client_name: str, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    client = CLIENTS[client_name]
    _require_bug(client)
    forms = _case_forms(client, name, tmp_path_factory)
    assert re.search(client.control_message, forms["single"]), forms["single"][-1500:]
    for form in FORMS:
        for options in ({"isolated": True}, {"env": {"TORCHFIX_DISABLE": client.fix}}):
            report = explain_json(forms[form], **options)
            assert client.fix not in {m["id"] for m in report["matches"]}, (form, options, report["matches"])


# -- recording (TORCHFIX_CORPUS_DIR) ------------------------------------------------------------------
_SITE_DIR = "/venv/lib/python3/site-packages/"
_SITE = re.compile(r"""(?:[A-Za-z]:)?[^\s"'(]*?[/\\](?:site|dist)-packages[/\\]""")


def neutral(text: str) -> str:
    """``text`` with this machine's paths, host name and temporary folders replaced by neutral ones."""
    text = _SITE.sub(_SITE_DIR, text)  # torch and the clients; torchfix too where installed from wheels
    text = text.replace(sys.executable, "/venv/bin/python").replace(sys.prefix, "/venv")
    text = re.sub(re.escape(str(HERE.parents[1] / "packages")) + r"[/\\][^/\\]+[/\\]src[/\\]", _SITE_DIR, text)
    text = text.replace(str(HERE), "/job")
    text = re.sub(r"/tmp/[^\s\"']*", "/tmp/run", text)
    host = socket.gethostname()
    return re.sub(rf"\b{re.escape(host)}\b", "node0", text) if host else text


def _record(client: Client, name: str, forms: dict[str, str]) -> None:
    folder = os.environ.get("TORCHFIX_CORPUS_DIR")
    if not folder:
        return
    out = Path(folder) / client.fix
    out.mkdir(parents=True, exist_ok=True)
    base_torch = torch.__version__.split("+")[0]
    stem = f"torch{base_torch}-{client.version().replace(' ', '')}-{name}"
    manifest_path = out / "MANIFEST.json"
    manifest: dict[str, Any] = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    for form, text in forms.items():
        suffix = "error.json" if form == "error.json" else f"{form}.log"
        file = f"{stem}.{suffix}"
        (out / file).write_text(neutral(text), encoding="utf-8")
        manifest[file] = {
            "expect": client.fix if name in client.red else None,
            "form": form,
            "client": client.version(),
            "case": name,
            "torch": base_torch,
        }
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n", encoding="utf-8")
