"""Without the redis client, torch has no Redis remote cache (the fix is ``not-installed``) and none
of these tests can show the bug: they skip, saying what to install."""

from __future__ import annotations

import pytest
from _util import redis_client_installed


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if redis_client_installed():
        return
    skip = pytest.mark.skip(reason="the redis client is not installed (pip install 'redis>=5'; the noxfile's tests do)")
    for item in items:
        item.add_marker(skip)
