"""Install the TransformerEngine stand-ins into the running interpreter's environment.

Run it with the test environment's Python, after ``transformer-engine==X`` (the pure-Python wheel,
``--no-deps``) is installed there::

    python packages/torchfix-fp8-recompute/tests/te_standins/install.py

It (1) compiles ``shim.c`` with the system C compiler into
``<site-packages>/transformer_engine_torch.<EXT_SUFFIX>`` (where the real ``transformer_engine_torch``
wheel puts its extension, and where TE's loader looks), and (2) writes ``torchfix-te-standins.pth``,
which puts this directory on ``sys.path`` (for ``transformer_engine_torch_standin``) and sets
``NVTE_PROJECT_BUILDING=1``: TE's own switch that skips ctypes-loading the CUDA core library,
cuDNN, NVRTC and cuRAND (``transformer_engine/common/__init__.py``), which do not exist on CPU.
Nothing in TE's Python sources is modified. Idempotent; ``--uninstall`` removes both files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
PTH = "torchfix-te-standins.pth"


def targets() -> tuple[Path, Path]:
    site = Path(sysconfig.get_paths()["purelib"])
    return site / f"transformer_engine_torch{sysconfig.get_config_var('EXT_SUFFIX')}", site / PTH


def install() -> None:
    so, pth = targets()
    include = sysconfig.get_paths()["include"]
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-shared", "-fPIC", "-O1", f"-I{include}", str(HERE / "shim.c"), "-o", str(so)]
    subprocess.run(cmd, check=True)
    pth.write_text(f"{HERE}\nimport os; os.environ.setdefault('NVTE_PROJECT_BUILDING', '1')\n")
    print(f"installed {so.name} and {pth.name} into {so.parent}")


def uninstall() -> None:
    for path in targets():
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    uninstall() if "--uninstall" in sys.argv[1:] else install()
