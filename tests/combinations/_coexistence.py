"""The co-existence check of many subsets in one interpreter: ``python _coexistence.py PLAN.json``.

``PLAN.json``: ``{"reference": {fix id: state alone}, "subsets": [[fix id, ...], ...]}``. Run with
every fix distribution importable and ``TORCHFIX_AUTOLOAD=0`` (tests/combinations/test_combinations.py
does). After importing every trigger module (those of absent libraries skipped), for each subset,
in turn:

1. ``torchfix_core.apply(only=subset)``: each fix must reach the state it has alone on this torch
   (``reference``, from ``_patch_points.py``): what else is applied changes no probe's verdict;
2. every applied fix holds live patches, and no two fixes hold a patch of one attribute (but the
   core's compile-cache key patch, which every applied fix of effect ``compiled`` shares); the key
   terms in force are exactly those of the applied ``compiled`` fixes;
3. one smoke step: a checkpointed two-layer MLP's forward and backward (eager, fixed seed), whose
   gradients must equal bit for bit those of the same step with nothing applied;
4. ``torchfix_core.revert(only=subset)``: no live patch and no key term is left, and every patched
   attribute is the original object again.

Prints one JSON line: ``{"results": [{"subset": [...], "problems": [...]}, ...], "seconds": ...}``.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torchfix_core
from torch.utils.checkpoint import checkpoint
from torchfix_core import Effect
from torchfix_core.testing import cache_key_patches, cache_key_terms, fix_spec, import_triggers, live_patches


def smoke_step() -> list[torch.Tensor]:
    """Gradients of one checkpointed forward/backward of a fixed two-layer MLP."""
    torch.manual_seed(0)
    layers = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
    x = torch.randn(8, 16, requires_grad=True)
    out = checkpoint(layers, x, use_reentrant=False)
    out.square().mean().backward()
    return [p.grad.clone() for p in layers.parameters()] + [x.grad.clone()]


def check(subset: list[str], reference: dict[str, str], baseline: list[torch.Tensor]) -> list[str]:
    problems: list[str] = []
    originals = {}
    torchfix_core.apply(only=subset)
    states = {r.id: str(r.state) for r in torchfix_core.status() if r.id in subset}
    for fix_id in subset:
        if states.get(fix_id) != reference.get(fix_id):
            problems.append(f"{fix_id}: {states.get(fix_id)} with {subset}, {reference.get(fix_id)} alone")
    keyed = sorted(f for f in subset if states.get(f) == "applied" and fix_spec(f).effect is Effect.COMPILED)
    if sorted(cache_key_terms()) != keyed:
        problems.append(f"compile-cache key terms {sorted(cache_key_terms())}, expected those of {keyed}")
    shared = {(id(owner), name) for owner, name, _ in cache_key_patches()}
    places: dict[tuple[int, str], str] = {}
    for fix_id in subset:
        patches = live_patches(fix_id)
        if states.get(fix_id) == "applied" and not patches:
            problems.append(f"{fix_id}: applied without a live patch")
        for owner, name, original in patches:
            originals[(id(owner), name)] = (owner, name, original)
            other = places.setdefault((id(owner), name), fix_id)
            if other != fix_id and (id(owner), name) not in shared:
                problems.append(f"{fix_id} and {other} both patch {getattr(owner, '__name__', owner)}.{name}")
    try:
        grads = smoke_step()
        if len(grads) != len(baseline) or not all(torch.equal(a, b) for a, b in zip(grads, baseline)):
            problems.append("the smoke step's gradients differ from those with nothing applied")
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"the smoke step raised {type(exc).__name__}: {exc}")
    torchfix_core.revert(only=subset)
    leftover = [fix_id for fix_id in subset if live_patches(fix_id)]
    if leftover:
        problems.append(f"live patches left after revert: {leftover}")
    if cache_key_terms() or cache_key_patches():
        problems.append(f"compile-cache key terms left after revert: {sorted(cache_key_terms())}")
    for owner, name, original in originals.values():
        if name == "__code__":
            current = owner.__code__
        elif hasattr(owner, "__dict__"):
            current = vars(owner).get(name, getattr(owner, name, None))
        else:  # a closure cell (cell_contents), a slot
            current = getattr(owner, name, None)
        if current is not original:
            problems.append(f"{getattr(owner, '__name__', owner)}.{name} is not the original after revert")
    return problems


def main(plan_path: str) -> None:
    plan = json.loads(open(plan_path, encoding="utf-8").read())
    started = time.perf_counter()
    import_triggers(ignore_missing=True)
    baseline = smoke_step()
    results = [
        {"subset": subset, "problems": check(list(subset), plan["reference"], baseline)} for subset in plan["subsets"]
    ]
    print(json.dumps({"results": results, "seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main(sys.argv[1])
