"""The compile caches' key term through the registry, with the family's real fixes.

A fix of effect ``compiled`` (``FixSpec.effect``) gets torchfix-core's key term when it is applied and
loses it when it is reverted; a key layout the core does not know refuses the fix before any patch.
Each case runs in a fresh interpreter with activation off (``TORCHFIX_AUTOLOAD=0``) and applies
``budget-rng`` by API, after importing its triggers. Every fix's page states its effect as its spec
declares it, and every ``compiled`` fix has a warm-cache test built on the kit's
``warm_cache_runs`` (tests/test_family_shape.py's sibling checks, here because they concern the
caches).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
from torchfix_core import Effect
from torchfix_core.testing import outside_validated_range, run_json_script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import family  # noqa: E402 - the repository's one list of packages (scripts/family.py)

sys.path.remove(str(ROOT / "scripts"))

FIX = "budget-rng"

APPLY_THEN_REVERT = """
import json, torch, torchfix_core
import torch._functorch.partitioners
import torch._inductor.codecache as codecache
from torchfix_core.testing import cache_key_patches, cache_key_terms, live_patches
original = vars(codecache.FxGraphHashDetails)["__init__"]
torchfix_core.apply(only=[FIX])
row = {r.id: r for r in torchfix_core.status()}[FIX]
out = {
    "state": str(row.state), "reason": row.reason, "terms": sorted(cache_key_terms()),
    "listed": any(o is codecache.FxGraphHashDetails and n == "__init__" for o, n, _ in live_patches(FIX)),
    "wrapped": vars(codecache.FxGraphHashDetails)["__init__"] is not original,
}
torchfix_core.revert(only=[FIX])
out["terms_after_revert"] = sorted(cache_key_terms())
out["restored"] = vars(codecache.FxGraphHashDetails)["__init__"] is original and not cache_key_patches()
torchfix_core.apply(only=[FIX])
out["terms_after_reapply"] = sorted(cache_key_terms())
print(json.dumps(out))
"""

UNKNOWN_LAYOUT = """
import json, torch, torchfix_core
import torch._functorch.partitioners as partitioners
import torch._inductor.codecache as codecache
from torchfix_core.testing import cache_key_terms
def __init__(self, gm, example_inputs, fx_kwargs):  # a layout the core was not written for
    pass
codecache.FxGraphHashDetails.__init__ = __init__
choose = partitioners.choose_saved_values_set
torchfix_core.apply(only=[FIX])
row = {r.id: r for r in torchfix_core.status()}[FIX]
print(json.dumps({
    "state": str(row.state), "reason": row.reason, "terms": sorted(cache_key_terms()),
    "partitioner_untouched": partitioners.choose_saved_values_set is choose,
    "init_untouched": vars(codecache.FxGraphHashDetails)["__init__"] is __init__,
}))
"""

needs_range = pytest.mark.skipif(
    outside_validated_range(FIX) is not None, reason=f"torch outside {FIX}'s validated range"
)


def _run(code: str) -> dict:
    return run_json_script(["-c", f"FIX = {FIX!r}\n{code}"], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=600)


@needs_range
def test_applied_compiled_fix_holds_its_term_and_revert_takes_it_back() -> None:
    r = _run(APPLY_THEN_REVERT)
    assert r["state"] == "applied", r
    assert r["terms"] == [FIX] and r["wrapped"] and r["listed"], r
    assert f"cache keys carry its term ({FIX} " in r["reason"], r["reason"]
    assert r["terms_after_revert"] == [] and r["restored"], r
    assert r["terms_after_reapply"] == [FIX], r


@needs_range
def test_unknown_key_layout_refuses_the_fix_before_any_patch() -> None:
    r = _run(UNKNOWN_LAYOUT)
    assert r["state"] == "failed", r
    assert "refused" in r["reason"] and "FxGraphHashDetails.__init__ has parameters" in r["reason"], r["reason"]
    assert r["terms"] == [] and r["partitioner_untouched"] and r["init_untouched"], r


def _specs() -> dict[str, object]:
    specs = {}
    for package in family.fix_packages():
        for fix_id, value in family.fix_entry_points(package).items():
            module, _, attr = value.partition(":")
            specs[fix_id] = (package, getattr(importlib.import_module(module), attr))
    return specs


def test_every_fix_page_states_its_effect_as_its_spec_declares() -> None:
    from torchfix_core._doctor import DOCS_PAGE

    problems = []
    for fix_id, (_, spec) in sorted(_specs().items()):
        page = (ROOT / DOCS_PAGE.format(id=fix_id)).read_text()
        stated = re.findall(r"^\*\*Effect:\*\* `([a-z-]+)`: ", page, re.M)
        if stated != [str(spec.effect)]:
            problems.append(f"{fix_id}: page states {stated}, spec declares {spec.effect}")
    assert problems == [], "\n".join(problems)


def test_every_compiled_fix_has_a_warm_cache_test() -> None:
    """A fix that changes what torch compiles proves, with the kit's orders, that a warm cache from
    before it cannot serve the bug (and the reverse): a test file of its package calls
    ``warm_cache_runs`` (directly, or through the kit's ``WarmCacheContract``) and names the fix."""
    compiled = {fix_id: package for fix_id, (package, spec) in _specs().items() if spec.effect is Effect.COMPILED}
    assert compiled, "no fix of effect compiled: the scan is broken"
    missing = [
        fix_id
        for fix_id, package in compiled.items()
        if not any(
            ("warm_cache_runs(" in text or "(WarmCacheContract)" in text) and fix_id in text
            for text in (path.read_text() for path in (package / "tests").glob("test_*.py"))
        )
    ]
    assert missing == [], f"fixes of effect compiled without a warm-cache test: {missing}"
