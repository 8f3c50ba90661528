"""What a fix's page states for the installed torch release, for tests that measure the statement.

A page that says per release how torch behaves without the fix (a table whose rows start with the
release, ``| 2.13.0 | ... |``, one cell of which is one of a few fixed statements) is checked by a
test that measures the behaviour on the installed torch and compares it with :func:`page_statement`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

__all__ = ["page_statement"]


def page_statement(page: Path, statements: Sequence[str]) -> str:
    """The one statement of ``statements`` that ``page`` makes for the installed torch's release
    (``X.Y.Z``, local version dropped): the cell of a table row starting with that release whose
    text starts with the statement. AssertionError naming the page when it states none, or more
    than one."""
    import torch

    release = torch.__version__.split("+")[0]
    found = {
        statement
        for line in page.read_text().splitlines()
        if line.startswith(f"| {release} |")
        for cell in line.strip().strip("|").split("|")[1:]
        for statement in statements
        if cell.strip().startswith(statement)
    }
    assert len(found) == 1, f"{page.name} states {sorted(found) or 'nothing'} of {list(statements)} for torch {release}"
    return found.pop()
