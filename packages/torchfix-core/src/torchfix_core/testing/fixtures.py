"""Pytest fixtures shared by the fix packages' tests (this module imports pytest).

A reproduction runs its scenarios twice, once with the fix and once without, each in a fresh
interpreter; the tests then read the two results. :func:`with_and_without_fix` makes that fixture
pair from one runner::

    from torchfix_core.testing.fixtures import with_and_without_fix

    with_fix, without_fix = with_and_without_fix(run_scenarios, scope="module")

Pytest finds a fixture by the module attribute that holds it, so the two names are the test
module's (or conftest's) own.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import pytest

Scope = Literal["session", "package", "module", "class", "function"]


def with_and_without_fix(run: Callable[..., Any], *, scope: Scope = "module") -> tuple[Any, Any]:
    """Two fixtures of ``scope``: the first returns ``run(fix=True)``, the second ``run(fix=False)``;
    each runs once per scope, when a test first asks for it."""

    @pytest.fixture(scope=scope)
    def with_fix() -> Any:
        return run(fix=True)

    @pytest.fixture(scope=scope)
    def without_fix() -> Any:
        return run(fix=False)

    return with_fix, without_fix
