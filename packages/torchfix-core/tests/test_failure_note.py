"""The note after an uncaught exception with a known signature: once, after the traceback, for the
main thread and other threads, the exception unchanged, off with TORCHFIX_EXPLAIN=0."""

from __future__ import annotations

import subprocess
import sys

from torchfix_core.testing import clean_environ

MAIN = "import torch\nraise RuntimeError('demo-checkpoint: detach_variable lost its inputs')\n"
THREAD = (
    "import threading, torch\n"
    "def work():\n"
    "    raise RuntimeError('demo-checkpoint: detach_variable lost its inputs')\n"
    "t = threading.Thread(target=work, name='worker'); t.start(); t.join()\n"
    "print('main thread done')\n"
)
NOTE = "[torchfix] known bug: Test fix: counts"


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_environ(env), timeout=300
    )


def test_main_thread_note_follows_the_unchanged_traceback() -> None:
    noted, plain = run(MAIN), run(MAIN, TORCHFIX_EXPLAIN="0")
    assert noted.returncode == plain.returncode == 1
    assert NOTE not in plain.stderr
    traceback, _, note = noted.stderr.partition(NOTE)
    assert traceback == plain.stderr, "the traceback before the note differs from the one without it"
    assert note.count("here: applied") == 1 and "TORCHFIX_EXPLAIN=0" in note
    assert noted.stderr.count(NOTE) == 1


def test_thread_exception_is_noted_and_the_process_goes_on() -> None:
    proc = run(THREAD)
    assert proc.returncode == 0 and "main thread done" in proc.stdout
    assert "Exception in thread worker" in proc.stderr
    assert proc.stderr.index("RuntimeError: demo-checkpoint") < proc.stderr.index(NOTE)
    assert proc.stderr.count(NOTE) == 1


def test_unknown_exception_gets_no_note_and_activation_imports_nothing_for_it() -> None:
    code = (
        "import sys, torch\n"
        "assert 'torchfix_core._explain' not in sys.modules, 'the note code was imported at import torch'\n"
        "raise RuntimeError('mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)')\n"
    )
    proc = run(code)
    assert proc.returncode == 1 and "shapes cannot be multiplied" in proc.stderr
    assert "[torchfix]" not in proc.stderr and "was imported" not in proc.stderr


def test_a_later_user_excepthook_replaces_ours() -> None:
    code = (
        "import sys, torch\n"
        "sys.excepthook = lambda *a: print('user hook', file=sys.stderr)\n"
        "raise RuntimeError('demo-checkpoint: detach_variable lost its inputs')\n"
    )
    proc = run(code)
    assert "user hook" in proc.stderr and NOTE not in proc.stderr


def test_malformed_switch_warns_and_keeps_the_note() -> None:
    proc = run(MAIN, TORCHFIX_EXPLAIN="maybe")
    assert "TORCHFIX_EXPLAIN='maybe' is not a boolean" in proc.stderr
    assert NOTE in proc.stderr
