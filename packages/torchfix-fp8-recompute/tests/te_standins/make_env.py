"""Create a CPU test environment with TransformerEngine's real Python sources and the stand-ins.

Usage (from the repository root; needs ``uv`` and a C compiler)::

    python packages/torchfix-fp8-recompute/tests/te_standins/make_env.py 2.18.0 [DEST]

DEST defaults to ``$FP8_RECOMPUTE_TE_ENVS/te-<version>`` (``FP8_RECOMPUTE_TE_ENVS`` defaults to
``~/.cache/torchfix/te-envs``). The environment gets: torch (``TORCH_SPEC``, default
``torch==2.13.0``, ``torch==2.8.0`` for TE 1.x, whose ``softmax.py`` imports
``torch.onnx._type_utils``, gone in torch 2.9; local wheels through ``PIP_FIND_LINKS`` work), pytest, the pure-Python
dependencies TE's ``transformer_engine.pytorch`` imports (the ``transformer_engine_torch``
distribution's requirements: pydantic, einops, onnx, onnxscript, nvdlfw-inspect, packaging, triton
on Linux), ``transformer-engine==<version>`` installed with ``--no-deps`` (the pure-Python wheel;
no CUDA core library, no compiled extension), torchfix-core and torchfix-fp8-recompute editable, and
finally the stand-ins (``install.py``). Prints the interpreter path. Reuses an existing DEST.

A nox session does the same with ``session.install`` calls followed by
``session.run("python", ".../te_standins/install.py")``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent.parent
REPO = PACKAGE.parent.parent
TE_RUNTIME_DEPS = ["pydantic", "einops", "onnx", "onnxscript", "nvdlfw-inspect", "packaging", "numpy"]


def default_dest(version: str) -> Path:
    root = os.environ.get("FP8_RECOMPUTE_TE_ENVS") or str(Path.home() / ".cache" / "torchfix" / "te-envs")
    return Path(root) / f"te-{version}"


def default_torch(version: str) -> str:
    """TE 1.x imports ``torch.onnx._type_utils`` (``softmax.py``), which torch 2.9 removed."""
    return "torch==2.8.0" if int(version.split(".")[0]) < 2 else "torch==2.13.0"


def python_of(dest: Path) -> Path:
    return dest / "bin" / "python"


def make_env(version: str, dest: Path | None = None, python: str = "3.11") -> Path:
    dest = dest or default_dest(version)
    py = python_of(dest)
    marker = dest / ".torchfix-te-ready"
    if marker.exists() and marker.read_text() == version:
        return py
    env = dict(os.environ, VIRTUAL_ENV=str(dest))
    env.pop("PYTHONPATH", None)
    if env.get("PIP_FIND_LINKS") and not env.get("UV_FIND_LINKS"):  # e.g. a local torch CPU wheel
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"]

    found = shutil.which("uv")
    uv_cmd = [found] if found else [sys.executable, "-m", "uv"]

    def uv(*args: str) -> None:
        subprocess.run([*uv_cmd, *args], check=True, env=env)

    def uv_pip_install(*args: str) -> None:
        # --python always: ``python -m uv pip`` would otherwise target the calling interpreter.
        uv("pip", "install", "-q", "--python", str(py), *args)

    uv("venv", "-q", "--allow-existing", "--python", python, str(dest))
    torch_spec = os.environ.get("TORCH_SPEC") or default_torch(version)
    triton = ["triton"] if sys.platform == "linux" else []
    uv_pip_install(torch_spec, "pytest", *TE_RUNTIME_DEPS, *triton)
    uv_pip_install("--no-deps", f"transformer-engine=={version}")
    uv_pip_install("--no-deps", "-e", str(REPO / "packages" / "torchfix-core"), "-e", str(PACKAGE))
    subprocess.run([str(py), str(HERE / "install.py")], check=True, env=env, stdout=subprocess.DEVNULL)
    marker.write_text(version)
    return py


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    print(make_env(sys.argv[1], Path(sys.argv[2]) if len(sys.argv) == 3 else None))
