"""redis-cache-errors on the CPU against a real redis-server: red without the fix, green with it, and
the cases where it must stay out of the way. Every run is a fresh interpreter (``_scenarios.py``)."""

from __future__ import annotations

import pytest
from _util import FIX, needs_server, run
from torchfix_core.testing import reproduce

pytestmark = needs_server

#: the exception each refusing server makes the compiled step raise without the fix
REFUSALS = {
    "oom": "redis.exceptions.OutOfMemoryError: command not allowed when used memory > 'maxmemory'.",
    "readonly": "redis.exceptions.ReadOnlyError: You can't write against a read only replica.",
    "noperm": "redis.exceptions.NoPermissionError: this user has no permissions to run the 'set' command",
}


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it() -> None:
    off, on = reproduce(FIX, False), reproduce(FIX, True, with_report=True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    assert off["outcome"]["measure"].startswith(REFUSALS["oom"]), off
    assert on["outcome"]["result"] == "not-observed" and on["state"] == "applied", on
    assert "(0 entries stored); gradient against eager: max abs diff 0" in on["outcome"]["measure"], on
    assert on["report"]["events"]["remote-write-refused"] > 0, on


@pytest.mark.parametrize("setup", sorted(REFUSALS))
def test_refused_write_fails_the_compile_without_fix(setup: str) -> None:
    r = run("refused", setup, on=False)
    assert not r["ok"] and r["error"] == REFUSALS[setup], r
    # the error comes out of AOTAutograd's save through the backend's write
    assert "in save\n" in r["traceback"] and "in _put\n" in r["traceback"], r["traceback"]
    assert r["report"]["state"] == "disabled", r


@pytest.mark.parametrize("setup", sorted(REFUSALS))
def test_refused_write_is_skipped_with_fix(setup: str) -> None:
    r = run("refused", setup, on=True)
    assert r["ok"] and r["max_abs_diff"] == 0.0, r
    assert r["entries"] == 0, r  # nothing was shared: the server refused every write
    assert r["counters"]["aot autograd_cache_saved"] == 1, r  # ... and the local cache has the entry
    events = r["report"]["events"]
    assert r["report"]["state"] == "applied" and events["remote-write-refused"] >= 2, r
    assert events["remote-read-failed"] == 0, r


def test_writes_resume_when_the_server_accepts_them_again() -> None:
    r = run("recovers", on=True)
    assert r["ok"], r
    assert r["entries_before"] == 0 and r["entries_after"] >= 2, r  # FX graph + AOTAutograd entries
    assert all(step["max_abs_diff"] == 0.0 for step in r["steps"]), r


@pytest.mark.parametrize("on", [False, True], ids=["without", "with"])
def test_healthy_server_shares_entries_alike(on: bool) -> None:
    """A server that accepts writes: the entries are stored and a process with an empty local cache
    gets the AOTAutograd entry from Redis, with the fix as without it; the fix counts nothing."""
    r = run("shared", on=on)
    assert r["ok"] and r["entries"] >= 2 and r["aot_hits"] == 1, r
    assert r["report"]["acted"] == 0, r


@pytest.mark.parametrize("on", [False, True], ids=["without", "with"])
def test_unreachable_server_stays_torchs_to_handle(on: bool) -> None:
    """No server listening: torch's own ConnectionError handling turns the remote cache off; the step
    runs alike with and without the fix, and the fix counts nothing."""
    r = run("gone", on=on)
    assert r["ok"] and r["max_abs_diff"] == 0.0, r
    assert r["report"]["acted"] == 0, r


def test_errors_that_are_not_the_servers_answer_propagate() -> None:
    r = run("other-error", on=True)
    assert r["report"]["state"] == "applied", r
    assert r["raised"] == {"_put": "ValueError: not a server's answer", "_get": "ValueError: not a server's answer"}, r
