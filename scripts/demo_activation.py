"""Demo, part 1: how torchfix activates at `import torch`, and what it costs.

Runs fresh interpreters: torchfix on, TORCHFIX_AUTOLOAD=0, and torch's autoload off with the
`torchfix_core.auto` fallback; prints the activation source, the fixes' states and whether any
heavy torch module was imported by activation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
{prelude}
import torch
t1 = time.perf_counter()
import torchfix_core
from torchfix_core import status
print(json.dumps({{
    "activation": torchfix_core.activation().as_dict(),
    "import_torch_s": round(t1 - t0, 3),
    "heavy_modules": sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor"))),
    "states": {{r.id: r.state for r in status()}},
}}))
"""


def run(title: str, env: dict[str, str], prelude: str = "") -> None:
    child = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFIX_", "TORCH_DEVICE_BACKEND"))}
    child.update(env)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(prelude=prelude)], env=child, capture_output=True, text=True, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"--- {title}")
    print(f"    activation: {report['activation']['source']} ({report['activation']['detail']})")
    print(
        f"    import torch took {report['import_torch_s']} s; torch._dynamo/_inductor loaded: {report['heavy_modules'] or 'none'}"
    )
    print("    states right after import torch: " + ", ".join(f"{k}={v}" for k, v in report["states"].items()))


def main() -> None:
    print("=" * 78)
    print("torchfix: activation at import torch")
    print("=" * 78)
    run("default: torch runs torchfix-core's torch.backends entry point", {})
    run("TORCHFIX_AUTOLOAD=0: installed but off", {"TORCHFIX_AUTOLOAD": "0"})
    run(
        "TORCH_DEVICE_BACKEND_AUTOLOAD=0 plus `import torchfix_core.auto` (fallback)",
        {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        prelude="import torchfix_core.auto",
    )
    print("Fixes stay 'pending' until the module they patch is imported (e.g. torch._inductor on the")
    print("first torch.compile); `torchfix-doctor` imports those modules and shows every final decision.")


if __name__ == "__main__":
    main()
