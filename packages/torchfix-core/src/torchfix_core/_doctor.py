"""``torchfix-doctor`` / ``python -m torchfix_core``: explain every decision torchfix made here.

By default doctor imports each pending fix's trigger modules (which may take a few seconds and
compile nothing), so that every fix reaches its final state; ``--no-resolve`` shows the state a
training script would have right after ``import torch``. ``--json`` prints the same data.

Subcommands: ``torchfix-doctor explain [FILE ...|-]`` names the known bugs in logs and tracebacks
(:mod:`torchfix_core._explain_cli`); ``torchfix-doctor report DIR`` summarises a job's
``TORCHFIX_REPORT`` files (:mod:`torchfix_core._report`); ``torchfix-doctor verify [ID ...]`` runs
each fix's declared reproduction here, without and with the fix (:mod:`torchfix_core._verify`).

Exit status: 0 when the report was made with torch importable; :data:`EXIT_NO_TORCH` (3) when torch
is not installed or its import fails (the report is still printed and says which): torchfix has
nothing to patch there. 2 is a usage error (argparse).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
from typing import Any

from torchfix_core._explain import DOCS_PAGE

__all__ = ["DOCS_PAGE", "EXIT_NO_TORCH", "collect", "main", "render"]

#: exit status when torch cannot be imported (not installed, or its import fails)
EXIT_NO_TORCH = 3


def _torch_info() -> dict[str, Any]:
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":  # torch is there, one of its own imports is missing
            return {"installed": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"installed": False, "error": "torch is not installed"}
    except Exception as exc:  # noqa: BLE001 - doctor must explain, not crash
        return {"installed": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "installed": True,
        "version": str(torch.__version__),
        "cuda": getattr(torch.version, "cuda", None),
        "git": getattr(torch.version, "git_version", None),
        "cuda_available": bool(torch.cuda.is_available()),
        "backend_autoload": os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "1",
    }


def _resolve(rows: list[Any]) -> dict[str, str]:
    """Import the triggers of pending fixes; returns trigger -> error for those that failed."""
    from torchfix_core import _registry
    from torchfix_core._states import FixState

    errors: dict[str, str] = {}
    for row in rows:
        if row.state is not FixState.PENDING:
            continue
        for name in _registry.entries()[row.id].spec.triggers:
            if name in sys.modules or name in errors:
                continue
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
                if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                    _registry.settle_missing_trigger(row.id, name)  # the module is absent, not broken
            except Exception as exc:  # noqa: BLE001
                errors[name] = f"{type(exc).__name__}: {exc}"
    return errors


def collect(resolve: bool = True) -> dict[str, Any]:
    torch_info = _torch_info()
    from torchfix_core import _activation, _registry, status
    from torchfix_core._status import Activation
    from torchfix_core.version import __version__

    activation = _activation.current()
    if torch_info["installed"] and activation.source is _activation.ActivationSource.NONE:
        # shown, not recorded: torch was imported and activation did not run, i.e. it is off here
        activation = Activation(
            _activation.ActivationSource.OFF,
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 and torchfix_core.auto was not imported"
            if not torch_info["backend_autoload"]
            else "torch did not run the torch.backends entry point (is torchfix-core installed here?)",
        )
    trigger_errors = _resolve(status()) if resolve and activation.source.active else {}
    settings = _registry.settings()
    return {
        "torchfix_core": __version__,
        "python": platform.python_version(),
        "torch": torch_info,
        "activation": activation.as_dict(),
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TORCHFIX_")},
        "environment_problems": list(settings.problems),
        "trigger_import_errors": trigger_errors,
        "fixes": [row.as_dict() for row in status()],
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"torchfix-core {report['torchfix_core']} on Python {report['python']}"]
    t = report["torch"]
    if t["installed"]:
        lines.append(
            f"torch {t['version']} (CUDA {t['cuda'] or 'none'}, GPU available: {t['cuda_available']}, git {str(t['git'])[:12]})"
        )
    elif t["error"] == "torch is not installed":
        lines.append("torch: not installed: torchfix has nothing to patch until torch is installed (pip install torch)")
    else:
        lines.append(f"torch: not importable ({t['error']}): torchfix has nothing to patch here")
    a = report["activation"]
    lines.append(f"activation: {a['source']} ({a['detail']})")
    for name, value in report["environment"].items():
        lines.append(f"env: {name}={value}")
    for problem in report["environment_problems"]:
        lines.append(f"env problem: {problem}")
    for name, error in report["trigger_import_errors"].items():
        lines.append(f"could not import trigger {name}: {error}")
    lines.append("")
    header = ("FIX", "STATE", "VERSION", "VALIDATED FOR")
    rows = [
        (f["id"], f["state"], f["version"] or "-", ", ".join(f"{k} {v}" for k, v in f["targets"].items()) or "-")
        for f in report["fixes"]
    ]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(4)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for fix, row in zip(report["fixes"], rows):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
        lines.append(f"    why: {fix['reason']}")
        for link in fix["upstream"]:
            lines.append(f"    upstream: {link}")
        lines.append(f"    page: {DOCS_PAGE.format(id=fix['id'])} (torchfix repository)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "explain":
        from torchfix_core._explain_cli import main as explain_main

        return explain_main(argv[1:], collect)
    if argv and argv[0] == "verify":
        from torchfix_core._verify import main as verify_main

        return verify_main(argv[1:], collect)
    if argv and argv[0] == "report":
        from torchfix_core._report import main as report_main

        return report_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="torchfix-doctor",
        description=__doc__.splitlines()[0],
        epilog=(
            "subcommands: 'explain [FILE ...|-]' (name known bugs in logs), 'report DIR' (summarise "
            "TORCHFIX_REPORT files), 'verify [ID ...]' (run each fix's reproduction here, without and with it)"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("--no-resolve", action="store_true", help="do not import pending fixes' trigger modules")
    args = parser.parse_args(argv)
    report = collect(resolve=not args.no_resolve)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["torch"]["installed"] else EXIT_NO_TORCH
