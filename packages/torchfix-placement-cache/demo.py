"""Demo of torchfix-placement-cache (``python packages/torchfix-placement-cache/demo.py``).

Runs each fix's declared reproduction (``torchfix_placement_cache.reproduction`` and
``reproduction_magi``, shipped in the wheel: what ``torchfix-doctor verify`` runs) without the fix and with it, every other fix off, each
in fresh interpreters with a private, temporary compile cache; one line per run: the fix's state,
the outcome and its measure (what the cache served wrongly), the seconds.

* placement-cache: two gloo ranks sharing one ``TORCHINDUCTOR_CACHE_DIR`` compile ``x * 2 + 1`` on
  a global ``(3, 8)`` ``Shard(0)`` DTensor (rank 0 holds ``(2, 8)``, rank 1 ``(1, 8)``), rank 0
  first. Without the fix rank 1 loads rank 0's artifact and fails Inductor's size assert.
* aot-bypass-key: one ``torch.compile`` of a function with two graph breaks, three graphs AOTAutograd
  cannot key (they call an ``allow_in_graph`` function). Without the fix (torch 2.10-2.14) all three
  get one fallback key and graphs 2 and 3 return graph 1's results.
* aot-autocast-key: compiled under bfloat16 autocast, run again under float16. Without the fix
  (torch 2.8-2.12) the float16 recompile is served the bfloat16 artifact.
* aot-hop-body-key: a checkpoint body calls an ``allow_in_graph`` function reading a global (2), a
  later process with the global at 3 shares the cache. Without the fix (torch 2.11-2.15) it is
  served the first process's artifact.

* magi-cache-key: two gloo ranks build a SimpleFSDP-style module with MagiCompiler, its weight
  ``Shard(0)``, then ``Replicate()`` under the same Magi cache root. Without the fix the second build
  loads the first one's artifact and fails Inductor's size assert. It needs MagiCompiler (``nox -s
  magi`` installs it): elsewhere both lines say it cannot run.

Where a bug is absent on this torch (fixed upstream, or the fix out of range), both lines say so.
"""

from __future__ import annotations

from torchfix_core.testing import reproduce
from torchfix_core.testing._scenario import ScenarioFailed

FIXES = ("placement-cache", "aot-bypass-key", "aot-autocast-key", "aot-hop-body-key", "magi-cache-key")


def show(fix_id: str, enabled: bool) -> None:
    """Run ``fix_id``'s declared reproduction, the fix alone on or off; print one line."""
    label = "with the fix" if enabled else "without the fix"
    try:
        r = reproduce(fix_id, enabled)
    except ScenarioFailed as exc:
        print(f"  {label:<16} the reproduction broke: {str(exc).splitlines()[0][:200]}")
        return
    outcome = r.get("outcome")
    if outcome is None:
        print(f"  {label:<16} the reproduction broke: {r.get('broke', '?')[:200]}")
        return
    what = outcome["measure"] or outcome["detail"]
    print(f"  {label:<16} fix {r['state']}, {r['seconds']:.0f} s: {outcome['result'].upper()}: {what}")


def main() -> None:
    import torch

    print(f"torch {torch.__version__}")
    for fix_id in FIXES:
        print(f"== {fix_id}")
        for enabled in (False, True):
            show(fix_id, enabled)


if __name__ == "__main__":
    main()
