"""Print, as one JSON line, where each installed fix patches on this torch: ``{fix id: {"state": ...,
"reason": ..., "points": [...]}}``.

Run in a fresh interpreter with every fix distribution importable and ``TORCHFIX_AUTOLOAD=0``
(tests/combinations/test_combinations.py does). The trigger modules of every fix are imported
first (those of absent libraries skipped); then each fix, **alone**, is applied through
``torchfix_core.apply(only=[id])``, its live patches are read (``torchfix_core.testing.live_patches``)
and named (``selection.point_names``), and it is reverted (exact: the originals are back) before
the next one. One at a time, because two fixes at one attribute would not both apply together
(the patching layer refuses to wrap another fix's wrapper): the full set would hide the very
overlap this looks for. A fix that is not applied here (not needed, out of range, library missing)
patches nothing on this torch, and has no points.
"""

from __future__ import annotations

import json

import torch  # noqa: F401 - what the fixes patch
import torchfix_core
from selection import point_names
from torchfix_core.testing import import_triggers, live_patches


def main() -> None:
    installed = [row.id for row in torchfix_core.status() if row.version is not None]
    import_triggers(ignore_missing=True)
    found: dict[str, dict[str, object]] = {}
    for fix_id in installed:
        torchfix_core.apply(only=[fix_id])
        (row,) = [r for r in torchfix_core.status() if r.id == fix_id]
        points = sorted({n for patch in live_patches(fix_id) for n in point_names(*patch)})
        found[fix_id] = {"state": str(row.state), "reason": str(row.reason), "points": points}
        torchfix_core.revert(only=[fix_id])
        leftover = live_patches(fix_id)
        assert not leftover, f"{fix_id}: patches left after revert: {leftover}"
    print(json.dumps(found, sort_keys=True))


if __name__ == "__main__":
    main()
