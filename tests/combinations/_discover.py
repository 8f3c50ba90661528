"""Print, as one JSON line, what discovery finds in this interpreter, without importing torch:
``[[fix id, state, reason, switched off?, why], ...]`` in application order
(``torchfix_core._registry.entries()``: entry points, data-only specs; no fix is scheduled) and, per
fix, whether the environment switches it off (the settings activation would act on)."""

from __future__ import annotations

import json
import sys

from torchfix_core import _registry

settings = _registry.settings()
rows = [
    [entry.id, str(entry.state), entry.reason, *settings.is_disabled(entry.id)]
    for entry in _registry.entries().values()
]
assert "torch" not in sys.modules, "discovery imported torch"
print(json.dumps(rows))
