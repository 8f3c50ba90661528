"""The recorded red runs of real clients are explained as their fix; the same messages elsewhere are not.

``tests/corpus/<fix id>/`` holds failures as real jobs printed them on the releases that have the
bug, recorded by the client tests (``tests/clients/test_client_corpus.py`` with
``TORCHFIX_CORPUS_DIR``: ``nox -s clients_corpus``), paths made neutral. ``MANIFEST.json`` says for
each file the form (one process's stderr, torchrun's ``[rankN]:`` log, torchelastic's
``error.json``), the client and release, and the fix it must be explained as (``null``: a control,
the same message raised outside the bug's context, which no fix may claim).

Each file is explained where the tests run (torch and every fix installed: the fix is named in
whatever state its probe gives on this torch) and where only the core and the family catalog are
importable (no torch: ``not-installed``). One explain run per side reads every file; each match's
``seen`` rows say which file it came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import explain_json

CORPUS = Path(__file__).with_name("corpus")
MANIFESTS = sorted(CORPUS.glob("*/MANIFEST.json"))


def _entries() -> dict[Path, dict[str, Any]]:
    entries: dict[Path, dict[str, Any]] = {}
    for manifest in MANIFESTS:
        for name, entry in json.loads(manifest.read_text(encoding="utf-8")).items():
            entries[manifest.parent / name] = entry
    return entries


def _claims(report: dict[str, Any]) -> dict[str, set[str]]:
    """file path -> ids explain named for it (and each match's state, under ``"<id> state"``)."""
    found: dict[str, set[str]] = {}
    for match in report["matches"]:
        for seen in match.get("seen", ()):
            found.setdefault(str(seen["where"]), set()).update({match["id"], f"{match['id']} {match['state']}"})
    return found


def test_corpus_is_recorded() -> None:
    entries = _entries()
    assert entries, f"no MANIFEST.json under {CORPUS}"
    missing = [str(path) for path in entries if not path.is_file()]
    assert not missing, missing
    listed = {path.name for path in entries}
    unlisted = [p.name for p in CORPUS.glob("*/*") if p.name != "MANIFEST.json" and p.name not in listed]
    assert not unlisted, f"files in the corpus that no MANIFEST.json lists: {unlisted}"
    # every fix's corpus has all three forms of a red run and a control
    for manifest in MANIFESTS:
        rows = json.loads(manifest.read_text(encoding="utf-8")).values()
        assert {r["form"] for r in rows if r["expect"]} == {"single", "torchrun", "error.json"}, manifest
        assert any(r["expect"] is None for r in rows), f"{manifest}: no control"


@pytest.mark.parametrize("isolated", [False, True], ids=["installed", "isolated-no-torch"])
def test_corpus_is_explained_as_recorded(isolated: bool) -> None:
    entries = _entries()
    report = explain_json(files=sorted(entries), isolated=isolated, timeout=600)
    assert report["exit"] in (0, 1) and not report["unreadable"], report  # 1: nothing matched (reported below)
    claims = _claims(report)
    wrong = {}
    for path, entry in entries.items():
        named = claims.get(str(path.resolve()), set())
        ids = {item for item in named if " " not in item}
        expected = {entry["expect"]} if entry["expect"] else set()
        if ids != expected or (isolated and expected and f"{entry['expect']} not-installed" not in named):
            wrong[path.name] = {"expected": sorted(expected), "named": sorted(named)}
    assert not wrong, json.dumps(wrong, indent=1)
