"""dcp-fqn-orig-mod's reproduction (``FixSpec.reproduction``: :func:`orig_mod_keys`), CPU only, no
process group, and the models the package's tests and demo build.

Shipped in the wheel so that ``torchfix-doctor verify`` runs on a user's machine what the tests and
the demo run; imported only when a reproduction runs (torch is imported inside the functions).

The case (pytorch/torchtitan#2622): ``Model`` holds two ``Block``s (``Linear(4, 4)``) in
``layers``; the training model wraps each block as ``checkpoint_wrapper(torch.compile(block))``
(activation checkpointing applied after compiling; nothing is compiled: no forward runs). Its
``get_model_state_dict`` is loaded with ``set_model_state_dict`` into a plain ``Model``, strictly
and with ``strict=False``. The bug: keys such as ``layers.0._orig_mod.lin.weight``; the strict load
raises ``Missing key(s) in state_dict``, the non-strict one loads none of those tensors.
"""

from __future__ import annotations

import warnings
from typing import Any

from torchfix_core.reproduction import Outcome, not_observed, observed

PREFIX_SEGMENT = "_orig_mod"


def model_class() -> Any:
    """``Model``: ``layers`` = two ``Block``s, each a ``Linear(4, 4)`` named ``lin``."""
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

    class Model(nn.Module):
        def __init__(self, blocks: int = 2) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(blocks)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    return Model


def wrap(model: Any, order: str = "ac-compile") -> Any:
    """Wrap each block of ``model`` in place: ``"ac-compile"`` = ``checkpoint_wrapper(torch.compile(b))``
    (the bug), ``"compile-ac"`` = ``torch.compile(checkpoint_wrapper(b))``, ``"compile"`` =
    ``torch.compile(b)``, ``"plain"`` = unchanged."""
    import torch
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i, block in enumerate(model.layers):
        if order == "ac-compile":
            model.layers[i] = checkpoint_wrapper(torch.compile(block))  # type: ignore[arg-type]
        elif order == "compile-ac":
            model.layers[i] = torch.compile(checkpoint_wrapper(block))
        elif order == "compile":
            model.layers[i] = torch.compile(block)
    return model


def prefixed(keys: Any) -> list[str]:
    """The keys with an ``_orig_mod`` segment."""
    return sorted(k for k in keys if PREFIX_SEGMENT in k.split("."))


def orig_mod_keys() -> Outcome:
    """The bug observed where ``get_model_state_dict`` of the ``checkpoint_wrapper(torch.compile(block))``
    model keeps ``_orig_mod`` in its keys (measure: how many, the keys a strict load into the plain model
    misses and the tensors a ``strict=False`` load leaves unloaded); not observed where the keys equal
    the plain model's and both loads restore every tensor."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict

    warnings.filterwarnings("ignore")
    model_cls = model_class()
    torch.manual_seed(0)
    trained = model_cls()
    reference = {k: v.detach().clone() for k, v in trained.state_dict().items()}
    state = get_model_state_dict(wrap(trained, "ac-compile"))
    keys = prefixed(state)
    try:
        set_model_state_dict(model_cls(), dict(state))
        strict_missing = 0
    except RuntimeError as exc:
        if "Missing key" not in str(exc):
            raise
        strict_missing = str(exc).split("Unexpected")[0].count('"') // 2
    target = model_cls()
    set_model_state_dict(target, dict(state), options=StateDictOptions(strict=False))
    loaded = target.state_dict()
    unloaded = sum(1 for k, v in reference.items() if not torch.equal(loaded[k], v))
    if keys or strict_missing or unloaded:
        return observed(
            f"{len(keys)} of {len(state)} keys carry _orig_mod (e.g. {keys[0] if keys else '-'}); a strict load "
            f"into the plain model misses {strict_missing} keys; strict=False leaves {unloaded} of "
            f"{len(reference)} tensors unloaded"
        )
    return not_observed(f"{len(state)} keys equal the plain model's; strict and strict=False loads restore all of them")
