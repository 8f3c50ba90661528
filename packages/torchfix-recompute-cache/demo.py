"""Demo section of torchfix-recompute-cache for ``nox -s demo``: the CPU reproduction before and after.

    python packages/torchfix-recompute-cache/demo.py

Runs pytorch#166926's shape (two checkpointed blocks call one compiled function with 4 and 6 rows;
the second recompiles it with dynamic shapes) in two fresh interpreters, without and with the fix,
then a process that compiles but never checkpoints, to show that it keeps Dynamo's LRU order.
Three fresh interpreters, each compiling with backend ``aot_eager`` (about a minute each on a
loaded 2-core VM).

Then budget-rng: ``sin(2 * dropout(x))`` compiled with ``activation_memory_budget`` 0.5 and 0
(pytorch#190758), without and with the fix: the gradient against the one the forward's mask
implies. Two more fresh interpreters (about 30 s each), each with its own compile cache directory.
"""

from __future__ import annotations

import tempfile

from torchfix_core.testing import describe_failure, only_fix, run_json_script_timed

#: the scenarios behind the declared reproductions, shipped in the wheel
SCENARIOS = "torchfix_recompute_cache.reproduction"
BUDGET_RNG = "torchfix_recompute_cache.reproduction_budget_rng"


def show(label: str, name: str, fix: bool) -> None:
    """Run scenario ``name`` in a fresh interpreter, recompute-cache alone on or off; print one line."""
    r = run_json_script_timed(["-m", SCENARIOS, name], env=only_fix("recompute-cache", fix))
    head = f"  {label:<22} torch {r.get('torch', '?')}, fix {r.get('state', '?')}, {r['seconds']:.1f} s: "
    lru = "LRU reordering " + ("on" if r.get("reorders") else "off")
    if r["ok"] and "grads_match" in r:
        print(head + f"OK, gradients equal the eager reference: {r['grads_match']} ({lru})")
    else:
        print(head + ("OK" if r["ok"] else describe_failure(r, 100)) + f" ({lru})")


def show_budget_rng(label: str, fix: bool) -> None:
    """The budget-rng suite (dropout at budgets 0.5 and 0) in a fresh interpreter; print one line."""
    with tempfile.TemporaryDirectory() as cache:  # never an artifact compiled in the other state
        env = {**only_fix("budget-rng", fix), "TORCHINDUCTOR_CACHE_DIR": cache}
        r = run_json_script_timed(["-m", BUDGET_RNG, "suite", "aot_eager"], env=env)
    head = f"  {label:<22} torch {r.get('torch', '?')}, fix {r.get('state', '?')}, {r['seconds']:.1f} s: "
    if not r["ok"]:
        print(head + describe_failure(r, 100))
        return
    cells = [
        f"budget {b}: {r[f'dropout@{b}']['mismatch']:.1%} of the gradient wrong "
        f"(max |diff| {r[f'dropout@{b}']['max_abs_diff']:.2g})"
        for b in ("0.5", "0.0")
    ]
    print(head + "; ".join(cells))


def main() -> None:
    print("== torchfix-recompute-cache: checkpoint recompute runs the compiled graph its forward ran ==")
    print("  checkpoint(f, x[4, 8]) + checkpoint(f, x[6, 8]), f = torch.compile(block), then backward:")
    show("without the fix:", "two_checkpointed_blocks", False)
    show("with the fix:", "two_checkpointed_blocks", True)
    print("  a process that compiles but never checkpoints, with the fix:")
    show("no checkpoint:", "no_checkpoint", True)
    print("== budget-rng: activation_memory_budget < 1 does not recompute dropout with fresh randomness ==")
    print("  y = compile(sin(2 * dropout(x, 0.5))), gradient vs the one the forward's mask implies:")
    show_budget_rng("without the fix:", False)
    show_budget_rng("with the fix:", True)


if __name__ == "__main__":
    main()
