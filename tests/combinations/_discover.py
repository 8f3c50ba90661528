"""Print, as one JSON line, what discovery finds in this interpreter, without importing torch:
``[[fix id, state, reason], ...]`` in application order (``torchfix_core._registry.entries()``:
entry points, data-only specs, the environment's switches; no fix is scheduled)."""

from __future__ import annotations

import json
import sys

from torchfix_core import _registry

rows = [[entry.id, str(entry.state), entry.reason] for entry in _registry.entries().values()]
assert "torch" not in sys.modules, "discovery imported torch"
print(json.dumps(rows))
