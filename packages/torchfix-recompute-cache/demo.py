"""Demo section of torchfix-recompute-cache for ``nox -s demo``: the CPU reproduction before and after.

    python packages/torchfix-recompute-cache/demo.py

Runs pytorch#166926's shape (two checkpointed blocks call one compiled function with 4 and 6 rows;
the second recompiles it with dynamic shapes) in two fresh interpreters, without and with the fix,
then a process that compiles but never checkpoints, to show that it keeps Dynamo's LRU order.
Three fresh interpreters, each compiling with backend ``aot_eager`` (about a minute each on a
loaded 2-core VM).
"""

from __future__ import annotations

from pathlib import Path

from torchfix_core.testing import describe_failure, only_fix, run_json_script_timed

SCENARIOS = Path(__file__).resolve().parent / "tests" / "_scenarios.py"


def show(label: str, name: str, fix: bool) -> None:
    """Run scenario ``name`` in a fresh interpreter, recompute-cache alone on or off; print one line."""
    r = run_json_script_timed([SCENARIOS, name], env=only_fix("recompute-cache", fix))
    head = f"  {label:<22} torch {r.get('torch', '?')}, fix {r.get('state', '?')}, {r['seconds']:.1f} s: "
    lru = "LRU reordering " + ("on" if r.get("reorders") else "off")
    if r["ok"] and "grads_match" in r:
        print(head + f"OK, gradients equal the eager reference: {r['grads_match']} ({lru})")
    else:
        print(head + ("OK" if r["ok"] else describe_failure(r, 100)) + f" ({lru})")


def main() -> None:
    print("== torchfix-recompute-cache: checkpoint recompute runs the compiled graph its forward ran ==")
    print("  checkpoint(f, x[4, 8]) + checkpoint(f, x[6, 8]), f = torch.compile(block), then backward:")
    show("without the fix:", "two_checkpointed_blocks", False)
    show("with the fix:", "two_checkpointed_blocks", True)
    print("  a process that compiles but never checkpoints, with the fix:")
    show("no checkpoint:", "no_checkpoint", True)


if __name__ == "__main__":
    main()
