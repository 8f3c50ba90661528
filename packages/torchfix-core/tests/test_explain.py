"""``torchfix-doctor explain``: logs of several ranks, torchelastic error files, states, bad input.

The demo-checkpoint fixture declares the signatures matched here (its package.py); the isolated
runs see nothing but copies of torchfix_core and the family's catalog (no fix installed, no torch),
the way explain runs on a laptop with a copied log. What is known of fixes that are not installed
comes from ``torchfix.catalog`` entry points (torchfix-all's; a demo one here): the core names no fix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from torchfix_core import _explain
from torchfix_core.testing import assert_explained, explain_json

RED = "RuntimeError: demo-checkpoint: detach_variable lost its inputs (step 3)"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 40, in <module>\n'
    '  File "train.py", line 12, in demo_recompute\n'
    "ValueError: demo-checkpoint: bad frame\n"
)


def explain_files(
    *paths: Path, json_out: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    from torchfix_core.testing import clean_environ

    command = [sys.executable, "-m", "torchfix_core", "explain", *(["--json"] if json_out else []), *map(str, paths)]
    return subprocess.run(command, capture_output=True, text=True, env=clean_environ(env), timeout=300)


def test_a_log_of_several_ranks_names_the_fix_with_its_ranks(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "[rank0]: step 3 loss 1.25\n"
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "train.py", line 40, in <module>\n'
        f"[rank1]: {RED}\n"
        f"[default3]:[rank3]: {RED}\n"
    )
    proc = explain_files(log)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    (match,) = report["matches"]
    assert match["id"] == "demo-checkpoint" and match["distribution"] == "torchfix-demo-checkpoint"
    assert sorted(s["rank"] for s in match["seen"]) == ["1", "3"]
    assert match["state"] == "applied" and "new variant" in match["advice"], match
    assert match["known_from"] == "installed spec"


def test_torchelastic_error_files_are_read_through_their_traceback(tmp_path: Path) -> None:
    files = []
    for local_rank in (0, 1):
        folder = tmp_path / "attempt_0" / str(local_rank)
        folder.mkdir(parents=True)
        message = RED if local_rank == 1 else "RuntimeError: something else"
        data = {
            "message": {
                "message": message,
                "extraInfo": {"py_callstack": f"Traceback ...\n{message}\n", "timestamp": "1"},
            }
        }
        (folder / "error.json").write_text(json.dumps(data))
        files.append(folder / "error.json")
    report = json.loads(explain_files(*files).stdout)
    (match,) = report["matches"]
    assert [s["rank"] for s in match["seen"]] == ["1"]


def test_text_rendering_says_bug_state_and_page(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(RED + "\n")
    proc = explain_files(log, json_out=False)
    assert proc.returncode == 0
    out = proc.stdout
    assert "[torchfix] known bug: Test fix: counts" in out
    assert "upstream: https://example.invalid/demo-checkpoint" in out
    assert "fix: demo-checkpoint (pip: torchfix-demo-checkpoint); here: applied" in out
    assert "details: docs/fixes/demo-checkpoint.md" in out


def test_disabled_fix_names_the_variable() -> None:
    match = assert_explained(RED, "demo-checkpoint", "disabled", env={"TORCHFIX_DISABLE": "demo-checkpoint"})
    assert "TORCHFIX_DISABLE lists 'demo-checkpoint'" in match["advice"]


def test_out_of_range_names_the_range_and_force(tmp_path: Path) -> None:
    # the range is the fixture's own (torch>=2.5); TORCHFIX_FORCE is named in the advice of any out-of-range fix
    entry = _explain.KnownEntry("x", "s", (), (), distribution="torchfix-x", targets={"torch": "<1.0"})
    state, advice = _explain.advice(entry, {"state": "out-of-range", "reason": "torch 2.13.0 is outside <1.0"}, True)
    assert state == "out-of-range" and "TORCHFIX_FORCE=x" in advice and "torch <1.0" in advice


def test_context_pattern_needs_the_traceback() -> None:
    report = explain_json(TRACEBACK)
    assert [m["id"] for m in report["matches"]] == ["demo-checkpoint"]
    bare = explain_json("ValueError: demo-checkpoint: bad frame\n")
    assert bare["matches"] == [] and bare["exit"] == 1


def test_isolated_explain_works_without_torch_or_any_fix() -> None:
    log = (  # the shape of Dynamo's output (tests/test_known_bugs.py reproduces it for real)
        "W1202 torch/_dynamo/convert_frame.py:2061] [0/8] torch._dynamo hit config.recompile_limit (8)\n"
        "W1202 torch/_dynamo/convert_frame.py:2061] [0/8]    last reason: 0/7: expected type of 'w3' to be "
        "<class 'torch.Tensor'>, but found <class 'torch.distributed._functional_collectives.AsyncCollectiveTensor'>\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 13, in <module>\n'
        "torch._dynamo.exc.FailOnRecompileLimitHit: Hard failure due to fullgraph=True\n" + RED
    )
    report = explain_json(log, isolated=True)
    assert report["torch_installed"] is False
    ids = [m["id"] for m in report["matches"]]
    assert ids == ["act-recompile"], ids  # the demo fixture is in no catalog
    assert report["matches"][0]["state"] == "no fix" and "workaround" in report["matches"][0]["advice"]


def test_no_match_exits_1_and_unreadable_input_exits_2(tmp_path: Path) -> None:
    plain = tmp_path / "plain.log"
    plain.write_text("RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)\n")
    proc = explain_files(plain, json_out=False)
    assert proc.returncode == 1 and "no known bug matched" in proc.stdout
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\xff\xfe\x00RuntimeError")
    proc = explain_files(plain, tmp_path / "missing.log", binary)
    report = json.loads(proc.stdout)
    assert proc.returncode == 2
    assert set(report["unreadable"]) == {str(tmp_path / "missing.log"), str(binary)}
    assert "FileNotFoundError" in report["unreadable"][str(tmp_path / "missing.log")]
    assert "UnicodeDecodeError" in report["unreadable"][str(binary)]


def test_malformed_json_is_read_as_text(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text("{not json\n" + RED + "\n")
    report = json.loads(explain_files(odd).stdout)
    assert [m["id"] for m in report["matches"]] == ["demo-checkpoint"]


@pytest.mark.parametrize("pattern", ["(unclosed", "[z-a]"])
def test_a_pattern_that_does_not_compile_is_reported_not_raised(pattern: str) -> None:
    entry = _explain.KnownEntry("broken", "s", (), ({"exception": "RuntimeError", "message": pattern},))
    assert _explain.bad_patterns([entry]) and not _explain.match_failures(
        _explain.failures_in_text("RuntimeError: x", ["RuntimeError"]), [entry]
    )


def _catalog_site(tmp_path: Path, body: str) -> Path:
    """A site directory holding one distribution, ``torchfix-demo-catalog``, whose ``torchfix.catalog``
    entry point loads ``demo_catalog:load`` (``body`` is that module's source)."""
    site = tmp_path / "site"
    info = site / "torchfix_demo_catalog-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchfix-demo-catalog\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[torchfix.catalog]\ntorchfix-demo-catalog = demo_catalog:load\n")
    (site / "demo_catalog.py").write_text(body)
    return site


ABSENT_ROW = (
    "def load():\n"
    "    return [{'id': 'demo-absent', 'distribution': 'torchfix-demo-absent', 'summary': 'A fix not installed.',\n"
    "             'signatures': [{'exception': 'RuntimeError', 'message': 'demo-absent: lost its queue'}]}]\n"
)


def _with_site(site: Path) -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}


def test_a_catalog_entry_point_names_a_fix_that_is_not_installed(tmp_path: Path) -> None:
    """The core names no fix: what it knows of fixes that are not installed comes from the
    ``torchfix.catalog`` entry points (torchfix-all's in a real install; a demo one here)."""
    text = "Traceback (most recent call last):\nRuntimeError: demo-absent: lost its queue\n"
    match = assert_explained(text, "demo-absent", "not-installed", env=_with_site(_catalog_site(tmp_path, ABSENT_ROW)))
    assert match["known_from"] == "catalog" and match["page"] == "docs/fixes/demo-absent.md", match
    assert "pip install torchfix-demo-absent" in match["advice"]


@pytest.mark.parametrize(
    "body",
    [
        "def load():\n    raise OSError('catalog.json: gone')\n",
        "def load():\n    return {'fixes': 'no list'}\n",
        "load = 3\n",
    ],
    ids=["raises", "not-a-list", "not-callable"],
)
def test_a_broken_catalog_is_reported_and_explain_still_answers(tmp_path: Path, body: str) -> None:
    log = tmp_path / "job.log"
    log.write_text(f"Traceback (most recent call last):\n{RED}\n")
    proc = explain_files(log, env=_with_site(_catalog_site(tmp_path, body)))
    assert proc.returncode == 0, proc.stderr
    assert [m["id"] for m in json.loads(proc.stdout)["matches"]] == ["demo-checkpoint"]
    assert "catalog entry point 'demo_catalog:load' cannot be loaded" in proc.stderr, proc.stderr


def test_without_a_catalog_explain_says_what_it_does_not_know(tmp_path: Path) -> None:
    """Run where only the core is importable (no torchfix-all): the human output says how to get
    the family's signatures; the JSON says ``family_catalog: false``."""
    import shutil

    import torchfix_core

    shutil.copytree(Path(torchfix_core.__file__).parent, tmp_path / "torchfix_core")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); from torchfix_core._doctor import main; raise SystemExit(main(sys.argv[1:]))"
    for extra, check in (([], "pip install torchfix-all"), (["--json"], '"family_catalog": false')):
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code, "explain", *extra, "-"],
            input=RED + "\n",
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 1 and check in proc.stdout, (proc.stdout, proc.stderr)


def test_torchfix_own_note_in_a_log_is_not_a_second_failure(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        f"{RED}\n"
        "[torchfix] known bug: Test fix: counts torch.utils.checkpoint.detach_variable calls.\n"
        f"  seen: {RED}\n"
        "  details: docs/fixes/demo-checkpoint.md (torchfix repository)\n"
        "[torchfix] (this note: TORCHFIX_EXPLAIN=0 turns it off; the exception above is unchanged)\n"
    )
    (match,) = json.loads(explain_files(log).stdout)["matches"]
    assert len(match["seen"]) == 1, match["seen"]
