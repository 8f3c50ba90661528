"""Print the docs table (docs/fixes/fp8-recompute.md) from the scenario results kept by the tests.

Usage: run the TE tests with ``FP8_RECOMPUTE_RESULTS_DIR=DIR`` in each TE environment, then
``python results_table.py DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _cell(result: dict[str, Any], scenario: str) -> str:
    if result["error"]:
        return "`KeyError`" if "global_fp8_buffer_pos_fwd_recompute" in result["error"] else f"`{result['error']}`"
    fwd, rec = result["fp8_forward_scales"], result["fp8_recompute_scales"]
    if scenario == "nonfp8":
        return "OK, no state" if not any(result["stash_key"].values()) else "OK, FP8 state created"
    scales = "/".join(f"{v:g}" for v in fwd)
    text = f"OK, scales {scales}" + (" (=)" if fwd == rec else f" != {rec}")
    if scenario == "mixed":
        text += ", 2nd not stashed" if not result["stash_key"]["plain"] else ", 2nd STASHED"
    return text


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def main(directory: str) -> None:
    runs: dict[str, dict[str, Any]] = {}
    for path in Path(directory).glob("te-*-fix.json"):
        data = json.loads(path.read_text())
        runs.setdefault(data["te"], {})["with" if data["fix_state"] != "disabled" else "without"] = data
    print(
        "| TE | torchfix | checkpoint | inner autocast: without / with fix | mixed: without / with | non-FP8: without / with |"
    )
    print("|---|---|---|---|---|---|")
    for version in sorted(runs, key=_version_key):
        pair = runs[version]
        if "with" not in pair or "without" not in pair:
            continue
        for mode in ("reentrant", "nonreentrant"):
            cells = [
                f"{_cell(pair['without'][f'{s}-{mode}'], s)} / {_cell(pair['with'][f'{s}-{mode}'], s)}"
                for s in ("inner", "mixed", "nonfp8")
            ]
            print(f"| {version} | {pair['with']['fix_state']} | {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
