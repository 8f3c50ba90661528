"""The family's catalog: every fix of the torchfix family with its summary, distribution, validated
range, upstream links and error signatures, as data (``catalog.json`` beside this module, generated
by the repository's ``scripts/generate.py`` from the fixes' own specs: do not edit it).

torchfix-core reads it through this distribution's ``torchfix.catalog`` entry point, so that
``torchfix-doctor explain`` recognises the failure of a fix that is not installed here and names the
distribution to install. Reading it imports nothing but the standard library and needs no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CATALOG_FILE = Path(__file__).with_name("catalog.json")


def load() -> list[dict[str, Any]]:
    """The catalog's rows (one per fix id). Raises ``OSError`` / ``ValueError`` / ``KeyError`` when the
    file is missing or malformed; torchfix-core reports that and goes on without the catalog."""
    rows = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))["fixes"]
    if not isinstance(rows, list):
        raise ValueError(f"{CATALOG_FILE.name}: 'fixes' is not a list")
    return rows
