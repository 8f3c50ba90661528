"""Installed on ``PYTHONPATH`` by ``torchfix-run``: activates torchfix in every child Python.

It imports ``torchfix_core.auto`` (which waits for ``import torch``), then runs the
``sitecustomize`` this one shadows, if any, so a user's own sitecustomize still runs.
"""

import importlib.util
import os
import sys

try:
    import torchfix_core.auto  # noqa: F401
except Exception as exc:  # noqa: BLE001 - never break interpreter start-up
    sys.stderr.write(f"[torchfix] activation hook not installed: {exc}\n")

_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    if os.path.abspath(_entry or os.getcwd()) == _here:
        continue
    _candidate = os.path.join(_entry or os.getcwd(), "sitecustomize.py")
    if os.path.isfile(_candidate):
        _spec = importlib.util.spec_from_file_location("_torchfix_user_sitecustomize", _candidate)
        if _spec is not None and _spec.loader is not None:
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
