"""Demo section of torchfix-dcp for ``nox -s demo``: the shipped reproduction before and after.

    python packages/torchfix-dcp/demo.py

Runs ``torchfix_dcp.reproduction:orig_mod_keys`` (CPU, no process group) in a fresh interpreter
without and with ``dcp-fqn-orig-mod``: ``get_model_state_dict`` of a model whose blocks are
``checkpoint_wrapper(torch.compile(block))``, loaded into the plain model strictly and with
``strict=False``. About 5-10 s per line.
"""

from __future__ import annotations

from typing import Any, Mapping

from torchfix_core.testing import demo_line, demo_reproduction

FIX = "dcp-fqn-orig-mod"


def describe(r: Mapping[str, Any]) -> str:
    outcome = r["outcome"]
    word = "BUG" if outcome["result"] == "observed" else "OK"
    return f"fix {r.get('state', '?')}, {r['seconds']:.1f} s: {word}: {outcome['measure']}"


def main() -> None:
    print("== torchfix-dcp: DCP state-dict keys of checkpoint_wrapper(torch.compile(block)) ==")
    for label, on in (("without the fix:", False), ("with the fix:", True)):
        print(demo_line(label, describe, demo_reproduction(FIX, on)))


if __name__ == "__main__":
    main()
