"""redis-cache-errors' signatures, from real runs.

The red runs of ``refused`` (the fix off; a full server, a read-only replica, a read-only ACL user)
raise the server's answer out of ``AOTAutogradCache.save`` through the Redis backend's ``_put``.
Each traceback is fed to ``torchfix-doctor explain``, which must name the fix ``not-installed`` (only
the core and the family catalog importable) and ``disabled`` (the fix off). The same exceptions
raised elsewhere (a user's own Redis client, a device OOM) are not claimed: the signatures need the
backend's frame in the traceback.
"""

from __future__ import annotations

import pytest
from _util import FIX, needs_server, run
from torchfix_core.testing import assert_explained_both_ways, explain_json, failure_text, only_fix


def _claimed(text: str) -> bool:
    return FIX in {m["id"] for m in explain_json(text, isolated=True)["matches"]}


@pytest.mark.parametrize("setup", ["oom", "readonly", "noperm"])
@needs_server[0]
def test_red_runs_are_explained(setup: str) -> None:
    r = run("refused", setup, on=False)
    assert not r["ok"], r
    match = assert_explained_both_ways(failure_text(r), FIX, off=only_fix(FIX, False))
    assert "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" in match["signature"]["when"], match


def test_the_same_errors_outside_the_backend_are_not_claimed() -> None:
    elsewhere = [
        # a user's own client, not torch's cache
        'Traceback (most recent call last):\n  File "train.py", line 12, in log_metrics\n    r.set("loss", v)\n'
        "redis.exceptions.OutOfMemoryError: command not allowed when used memory > 'maxmemory'.\n",
        'Traceback (most recent call last):\n  File "train.py", line 12, in log_metrics\n    r.set("loss", v)\n'
        "redis.exceptions.ReadOnlyError: You can't write against a read only replica.\n",
        # a device OOM
        'Traceback (most recent call last):\n  File "train.py", line 30, in step\n    y = model(x)\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
        # the message without its traceback
        "redis.exceptions.NoPermissionError: this user has no permissions to run the 'set' command\n",
    ]
    for text in elsewhere:
        assert not _claimed(text), text
