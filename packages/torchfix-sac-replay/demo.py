"""Demo section of torchfix-sac-replay for ``nox -s demo``: the CPU reproduction before and after.

    python packages/torchfix-sac-replay/demo.py

Runs BRIEF section 3.4 (recompute-time guard miss with ``backward()`` on another thread, the CPU
stand-in for CUDA's autograd worker) in two fresh interpreters, without and with the fix, then the
compiled-forward/eager-replay mismatch with the fix to show the explained error. About 30-40 s.
"""

from __future__ import annotations

from torchfix_core.testing import describe_failure, only_fix, run_json_script_timed

#: the scenarios behind the declared reproductions, shipped in the wheel (``python -m`` them)
SAC_REPLAY = "torchfix_sac_replay.reproduction_sac_replay"
BACKWARD_CONTEXT = "torchfix_sac_replay.reproduction_backward_context"
STORAGE_KEY = "torchfix_sac_replay.reproduction_sac_storage_key"


def run(module: str, fix_id: str, fix: bool, *args: str) -> dict[str, object]:
    """One scenario of ``module`` in a fresh interpreter, ``fix_id`` alone on or off."""
    return run_json_script_timed(["-m", module, *args], env=only_fix(fix_id, fix))


def show(label: str, r: dict[str, object], fix_key: str, ok_text: str) -> None:
    head = f"  {label:<37} torch {r.get('torch', '?')}, fix {r.get(fix_key, '?')}, {r['seconds']:.1f} s: "
    print(head + (ok_text if r["ok"] else describe_failure(r, 100)))


def main() -> None:
    print("== torchfix-sac-replay: checkpoint recompute runs under the forward's compiler config ==")
    print("  compiled block with 8 cache entries, recompile_limit=64 on the main thread, SAC checkpoint,")
    print("  a guarded global flips before backward(), backward() on a threading.Thread (CPU stand-in")
    print("  for the CUDA autograd worker thread):")
    for label, fix in (("without the fix (disabled):", False), ("with the fix:", True)):
        r = run(SAC_REPLAY, "sac-replay", fix, "guard_miss")
        show(label, r, "fix", f"OK (gradients equal the eager reference: {r.get('grad_match')})")
    print("  compiled forward replayed eagerly (BRIEF 1.1), with the fix: the error says why")
    r = run(SAC_REPLAY, "sac-replay", True, "eager_replay")
    if r["ok"]:
        print("  (no error: the fix is not needed on this torch)")
    else:
        text = str(r["error"])
        start = text.find("[torchfix sac-replay]")
        for line in (text[start:] if start >= 0 else text).splitlines():
            print("    " + line)
        print(f"    __cause__: {r.get('cause_type')}: {str(r.get('cause')).splitlines()[0][:100]}")
    backward_context()
    storage_key()


def backward_context() -> None:
    """backward-context: two compiled backwards of one backward() at the same time (pytorch#185372)."""
    print("== torchfix-sac-replay backward-context: each compiled backward in its own copy of the context ==")
    print("  region A's compiled backward on the calling thread, region B's on a second device's autograd")
    print("  worker thread (torch's Python PrivateUse1 backend stands in for a GPU), both inside at once:")
    for label, fix in (("without the fix (disabled):", False), ("with the fix:", True)):
        r = run(BACKWARD_CONTEXT, "backward-context", fix, "--timeout", "10")
        threads = sorted({row["thread"] for row in r.get("seen", [])})  # type: ignore[attr-defined]
        show(label, r, "backward-context", f"OK on threads {threads}, gradients correct: {r.get('grad_ok')}")


def storage_key() -> None:
    """sac-storage-key: a recompute that skips a cached compiled region (pytorch#175258)."""
    print("== torchfix-sac-replay sac-storage-key: one SAC queue per compiled region ==")
    print("  upstream's regression test: SAC saves inductor_compiled_code, a compiled arange is cached in a")
    print("  dict in the forward, so the recompute skips it; then the same with plain tensors of equal shapes:")
    for scenario in ("upstream", "silent"):
        for label, fix in (("without the fix (disabled):", False), ("with the fix:", True)):
            r = run(STORAGE_KEY, "sac-storage-key", fix, scenario)
            show(f"{scenario:<8} {label}", r, "fix", f"OK, gradient correct: {r.get('grad_match')}")


if __name__ == "__main__":
    main()
