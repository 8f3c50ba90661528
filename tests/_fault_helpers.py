"""Code run inside the fault-suite subprocesses (imported there, never by pytest itself)."""

from __future__ import annotations

import json
import sys
from typing import Any


def import_all_triggers() -> None:
    """Import every installed fix's trigger modules, so every fix reaches its final state."""
    from torchfix_core.testing import import_triggers

    import_triggers(ignore_missing=True)


def patch_points() -> list[tuple[object, str, Any]]:
    """(owner, name, original) of every live patch of every applied fix."""
    from torchfix_core.testing import live_patches

    return live_patches()


def originals_restored(points: list[tuple[object, str, Any]]) -> list[str]:
    """Names of patch points that are NOT back to their original object."""
    from torchfix_core.patching import PatchRefused, read_raw

    bad = []
    for owner, name, original in points:
        if name == "__code__":
            if owner.__code__ is not original:  # type: ignore[attr-defined]
                bad.append(f"{owner!r}.__code__")
            continue
        try:
            current = read_raw(owner, name)
        except PatchRefused:
            current = None
        if current is not original:
            bad.append(f"{getattr(owner, '__name__', owner)}.{name}")
    return bad


def states() -> dict[str, str]:
    from torchfix_core import status

    return {r.id: r.state for r in status()}


def emit(**data: Any) -> None:
    print(json.dumps(data, default=str))
    sys.stdout.flush()
