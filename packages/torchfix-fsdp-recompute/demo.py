"""Demo section of torchfix-fsdp-recompute for ``nox -s demo``: the CPU reproductions before and after.

    python packages/torchfix-fsdp-recompute/demo.py

Runs, each in a fresh interpreter with one gloo rank on the CPU: pytorch#159359's shape (Hugging
Face-style checkpoint around each ``fully_shard``-ed block, bf16 ``param_dtype``, fp32 inputs)
without and with ``fsdp-recompute-cast``, then pytorch#187437's (nested ``fully_shard``, two
forwards before one backward) without and with ``fsdp-recompute-unshard``. "With" compares three
SGD steps with the same model trained without checkpointing. Where torch carries upstream's fix
the fix is ``not-needed`` and both lines are green. About 20 s per line on a loaded 2-core VM.
"""

from __future__ import annotations

from torchfix_core.testing import describe_failure, only_fix, run_json_script_timed

#: the scenarios behind the declared reproductions, shipped in the wheel
SCENARIOS = "torchfix_fsdp_recompute.reproduction"


def show(label: str, scenario: str, fix_id: str, fix: bool) -> None:
    """Run ``scenario`` on one rank, ``fix_id`` alone on or off; print one line."""
    r = run_json_script_timed(["-m", SCENARIOS, scenario, "1"], env=only_fix(fix_id, fix))
    state = r.get("states", {}).get(fix_id, "?")
    head = f"  {label:<18} torch {r.get('torch', '?')}, fix {state}, {r['seconds']:.1f} s: "
    if r["ok"] and "grads_equal" in r:
        print(head + f"OK, 3 steps' gradients bit-identical to no checkpointing: {r['grads_equal']}")
    else:
        print(head + ("OK" if r["ok"] else describe_failure(r, 100)))


def main() -> None:
    print("== torchfix-fsdp-recompute: FSDP2 modules recomputed by activation checkpointing ==")
    print("  checkpoint(block, h) per fully_shard-ed block, MixedPrecisionPolicy(param_dtype=bf16), fp32 h:")
    show("without the fix:", "cast", "fsdp-recompute-cast", False)
    show("with the fix:", "cast", "fsdp-recompute-cast", True)
    print("  checkpoint(m), fully_shard(m.fc1), (m(x1) * m(x2)).sum().backward():")
    show("without the fix:", "unshard", "fsdp-recompute-unshard", False)
    show("with the fix:", "unshard", "fsdp-recompute-unshard", True)


if __name__ == "__main__":
    main()
