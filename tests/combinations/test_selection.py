"""Unit tests of selection.py: which subsets the combination suite runs (pure Python, fast)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from selection import (  # noqa: E402 - this directory's selection.py
    FixFacts,
    Reached,
    channels,
    enabled_variable,
    groups,
    load_facts,
    point_names,
    powerset,
    realize,
    reproduce_in,
    select,
    selection_size,
    touched_module,
)


def fix(
    i: str,
    dist: str | None = None,
    triggers: tuple[str, ...] = (),
    after: tuple[str, ...] = (),
    points=(),
    touched=(),
    reach=(),
    apply_imports=(),
    own_modules=(),
):
    return FixFacts(
        i,
        dist or f"torchfix-{i}",
        triggers or (f"mod_{i}",),
        tuple(after),
        frozenset(points),
        frozenset(touched),
        frozenset(reach),
        frozenset(apply_imports),
        frozenset(own_modules),
    )


def unrelated(n: int) -> list[FixFacts]:
    return [fix(f"f{k:02d}") for k in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 12])
def test_unrelated_fixes_get_each_alone_every_pair_and_all(n: int) -> None:
    fixes = unrelated(n)
    chosen = select(fixes)
    ids = sorted(f.id for f in fixes)
    expected = {(i,) for i in ids} | set(itertools.combinations(ids, 2)) | {tuple(ids)}
    assert set(chosen) == expected
    assert len(chosen) == selection_size(n) == len(expected)
    assert groups(fixes) == []


def test_reasons_and_order() -> None:
    chosen = select(unrelated(3))
    assert list(chosen)[:3] == [("f00",), ("f01",), ("f02",)]
    assert chosen[("f00",)] == ["alone"]
    assert chosen[("f00", "f01")] == ["pair"]
    assert list(chosen)[-1] == ("f00", "f01", "f02") and chosen[("f00", "f01", "f02")] == ["all"]
    assert [len(s) for s in chosen] == sorted(len(s) for s in chosen)


def test_powerset_is_every_nonempty_subset() -> None:
    for n in (1, 4, 8):
        assert len(powerset(unrelated(n))) == 2**n - 1
    assert len(select(unrelated(8))) == 8 + 28 + 1  # 37 of 255


def assert_every_subset_of(group: tuple[str, ...], chosen: dict) -> None:
    for size in range(1, len(group) + 1):
        for subset in itertools.combinations(sorted(group), size):
            assert subset in chosen, subset


def test_a_shared_trigger_module_groups_fixes_also_through_parent_packages() -> None:
    fixes = [
        fix("a", triggers=("torch._dynamo",)),
        fix("b", triggers=("torch._dynamo.aot_compile",)),
        fix("c", triggers=("torch._dynamo",)),
        fix("d", triggers=("torch._dynamo_extra",)),  # a sibling name, not inside torch._dynamo
        *unrelated(3),
    ]
    (group,) = groups(fixes)
    assert (group.kind, group.members) == ("trigger", ("a", "b", "c"))
    chosen = select(fixes)
    assert_every_subset_of(group.members, chosen)
    assert "trigger group: torch._dynamo, torch._dynamo.aot_compile" in chosen[("a", "b", "c")]
    assert not any(len(s) == 3 and "d" in s for s in chosen)
    assert len(chosen) == selection_size(7, [3])


def test_after_edges_group_transitively() -> None:
    fixes = [fix("a"), fix("b", after=("a",)), fix("c", after=("b",)), fix("x", after=("absent-member",)), fix("y")]
    (group,) = groups(fixes)
    assert (group.kind, group.members) == ("after", ("a", "b", "c"))
    assert ("a", "b", "c") in select(fixes)


def test_shared_patch_points_group_transitively() -> None:
    fixes = [
        fix("a", points={"m.C.f"}),
        fix("b", points={"m.C.f", "m.g"}),
        fix("c", points={"m.g"}),
        fix("d", points={"m.C.h"}),
        fix("e"),
    ]
    (group,) = groups(fixes)
    assert (group.kind, group.key, group.members) == ("patch point", "m.C.f, m.g", ("a", "b", "c"))
    assert "patch point group: m.C.f, m.g" in select(fixes)[("a", "b", "c")]


def test_fixes_of_one_distribution_are_a_group() -> None:
    fixes = [fix("a", dist="torchfix-x"), fix("b", dist="torchfix-x"), fix("c", dist="torchfix-x"), *unrelated(4)]
    (group,) = groups(fixes)
    assert (group.kind, group.key, group.members) == ("distribution", "torchfix-x", ("a", "b", "c"))
    assert_every_subset_of(("a", "b", "c"), select(fixes))
    assert realize(("a",), fixes) == (("torchfix-x",), ("b", "c"))
    assert realize(("a", "b", "c", "f00"), fixes) == (("torchfix-f00", "torchfix-x"), ())
    with pytest.raises(KeyError):
        realize(("nope",), fixes)


def test_groups_of_several_kinds_each_get_their_subsets() -> None:
    fixes = [
        fix("a", triggers=("t",)),
        fix("b", triggers=("t",)),
        fix("c", triggers=("t",)),
        fix("d", points={"p"}),
        fix("e", points={"p"}),
        fix("f", points={"p"}),
        fix("g", points={"p"}, triggers=("t",)),
        *unrelated(3),
    ]
    kinds = {(g.kind, g.members) for g in groups(fixes)}
    assert kinds == {("trigger", ("a", "b", "c", "g")), ("patch point", ("d", "e", "f", "g"))}
    chosen = select(fixes)
    assert_every_subset_of(("a", "b", "c", "g"), chosen)
    assert_every_subset_of(("d", "e", "f", "g"), chosen)
    # 10 fixes: 10 + 45 + 1, plus the triples and quadruples of two groups of four (5 each)
    assert len(chosen) == 10 + 45 + 1 + 5 + 5 < 2**10 - 1


class Owner:
    def method(self) -> None: ...

    @staticmethod
    def static() -> None: ...

    @property
    def prop(self) -> int:
        return 1


def function() -> None: ...


def test_point_names_of_wraps_replacements_and_code_swaps_meet_at_the_function() -> None:
    here = __name__
    assert point_names(Owner, "method", Owner.__dict__["method"]) == {f"{here}.Owner.method"}
    assert point_names(Owner, "static", Owner.__dict__["static"]) == {f"{here}.Owner.static"}
    assert point_names(Owner, "prop", Owner.__dict__["prop"]) == {f"{here}.Owner.prop"}
    module = sys.modules[here]
    swapped = point_names(function, "__code__", function.__code__)
    assert swapped == {f"{here}.function"}
    # a wrap of a re-export of `function` in another module meets the code swap of `function`
    other = type(sys)("elsewhere")
    other.function = function  # type: ignore[attr-defined]
    assert point_names(other, "function", function) == {"elsewhere.function", f"{here}.function"}
    assert point_names(module, "function", function) & swapped


def test_enabled_variable() -> None:
    assert enabled_variable("magi-cache-key") == "TORCHFIX_MAGI_CACHE_KEY_ENABLED"


def test_the_family_loads_from_the_source_tree() -> None:
    fixes = load_facts()
    by_id = {f.id: f for f in fixes}
    assert by_id["placement-cache"].distribution == by_id["magi-cache-key"].distribution == "torchfix-placement-cache"
    assert "magi_compiler" in by_id["magi-aot-fallback"].triggers
    found = groups(fixes)

    def grouped(kind: str, *ids: str) -> bool:
        return any(g.kind == kind and set(ids) <= set(g.members) for g in found)

    assert grouped("distribution", "magi-cache-key", "placement-cache")
    assert grouped("trigger", "magi-aot-fallback", "magi-cache-key")
    assert grouped("trigger", "aot-fallback", "sac-replay")  # torch._dynamo.aot_compile is inside torch._dynamo
    chosen = select(fixes)
    assert all((f.id,) in chosen for f in fixes) and tuple(sorted(by_id)) in chosen


def test_channels_name_every_way_one_fix_can_reach_another_reproduction() -> None:
    checkpoint = ("code", "checkpoint.py:10:checkpoint", "torch.utils.checkpoint")
    fsdp = ("module", "torch.distributed.fsdp", "torch.distributed.fsdp")
    fixes = [
        fix("a", dist="torchfix-ab", triggers=("torch._dynamo",), reach={checkpoint}),
        fix("b", dist="torchfix-ab", triggers=("torch._dynamo.aot_compile",)),
        fix("c", after=("a",), points={"m.f"}),
        fix("d", triggers=("torch.distributed",), points={"m.f"}, reach={fsdp}, apply_imports={"torch.fx"}),
        fix("e"),  # patches nothing, shares nothing: reaches nobody, reached by nobody
    ]
    every = {
        "torch",
        "torch._dynamo",
        "torch.utils.checkpoint",
        "torch.distributed",
        "torch.distributed.fsdp",
        "torch.fx",
    }
    reached = {
        "a": Reached(frozenset({"torch", "torch.distributed", "torch.distributed.fsdp"})),
        "b": Reached(
            frozenset({"torch", "torch._dynamo", "torch.utils.checkpoint", "torch.distributed"}),
            frozenset({checkpoint[1]}),
        ),
        # c imports checkpoint, but no code of it ran
        "c": Reached(frozenset({"torch", "torch._dynamo", "torch.utils.checkpoint", "torch.fx"})),
        "d": Reached(frozenset({"torch", "torch.distributed"})),
        "e": Reached(frozenset(every), frozenset({checkpoint[1]})),
    }
    found = channels(fixes, reached)
    assert found[("a", "b")] == ["distribution torchfix-ab", "trigger", "reached torch.utils.checkpoint:checkpoint"]
    assert found[("b", "a")] == ["distribution torchfix-ab", "trigger"]
    assert found[("a", "c")] == ["after"] == found[("c", "a")]  # c's run never entered a's patched function
    assert found[("c", "d")] == found[("d", "c")] == ["patch point m.f"]
    # d applies where torch.distributed is imported; its module entry is met where fsdp is imported, and
    # its apply imports torch.fx: new to every run that did not import it
    assert found[("d", "a")] == ["reached torch.distributed.fsdp", "apply imports torch.fx"]
    assert found[("d", "b")] == ["apply imports torch.fx"] and ("a", "d") not in found
    assert found[("a", "e")] == ["reached torch.utils.checkpoint:checkpoint"]
    assert found[("d", "e")] == ["reached torch.distributed.fsdp"]
    assert not any(g == "e" for g, _ in found)
    # a's trigger never imported in d's run: a is never applied there, whatever d reached
    assert ("a", "d") not in channels(
        fixes, {**reached, "d": Reached(frozenset({"torch"}), frozenset({checkpoint[1]}))}
    )
    # an opaque record (Python ran where the recorder cannot see): a code entry counts by its module
    opaque = {**reached, "c": Reached(reached["c"].modules, frozenset(), opaque="a PrivateUse1 device")}
    assert channels(fixes, opaque)[("a", "c")] == ["after", "reached torch.utils.checkpoint:checkpoint"]


def test_name_entries_and_the_modules_a_distribution_shares() -> None:
    lru = ("name", "_set_lru_cache", "torch._C._dynamo.eval_frame")
    fixes = [
        fix("g", dist="torchfix-x", triggers=("torch",), reach={lru}, own_modules={"tx", "tx.package", "tx.g"}),
        fix("f", dist="torchfix-x", own_modules={"tx", "tx.package", "tx.version", "tx.f"}),
        fix("h", dist="torchfix-x", own_modules={"tx", "tx.h", "tx.g"}),
        fix("k", dist="torchfix-x"),  # its modules not measured: any two of one distribution
    ]
    modules = frozenset({"torch", "torch._C._dynamo.eval_frame"})
    reached = {
        "f": Reached(modules, names=frozenset({"other_name"})),
        "h": Reached(modules, names=frozenset({"_set_lru_cache"})),
        "k": Reached(modules, names=frozenset({"_set_lru_cache"}), opaque="a PrivateUse1 device"),
    }
    found = channels(fixes, reached)
    assert ("g", "f") not in found and ("f", "g") not in found  # declarations only; f never names it
    assert found[("g", "h")] == [
        "distribution torchfix-x (shared tx.g)",
        "reached torch._C._dynamo.eval_frame._set_lru_cache",
    ]
    assert found[("h", "g")] == ["distribution torchfix-x (shared tx.g)"]
    # opaque: the name entry counts by its module (imported here)
    assert found[("g", "k")] == ["distribution torchfix-x", "reached torch._C._dynamo.eval_frame._set_lru_cache"]
    assert found[("f", "k")] == found[("k", "f")] == ["distribution torchfix-x"]


def test_reproductions_run_in_the_full_set_and_in_pairs_with_a_channel_only() -> None:
    everyone = ("a", "b", "c", "d")
    linked = {("a", "b"): ["module m"], ("c", "d"): ["after"], ("d", "c"): ["after"]}
    can, applied = ("a", "b", "c", "d"), ("a", "b", "c")
    assert reproduce_in(everyone, everyone, can, linked, applied) == everyone
    assert reproduce_in(("a", "b"), everyone, can, linked, applied) == ("b",)  # b can be reached by a
    assert reproduce_in(("c", "d"), everyone, can, linked, applied) == ("c",)  # d is not applied here
    assert reproduce_in(("a", "c"), everyone, can, linked, applied) == ()  # no channel: co-existence only
    assert reproduce_in(("a",), everyone, can, linked, applied) == ("a",)  # alone: it records what it reaches
    assert reproduce_in(("d",), everyone, can, linked, applied) == ("d",)
    assert reproduce_in(("a", "b", "c"), everyone, can, linked, applied) == ()  # a group's: pairs cover it
    assert reproduce_in(everyone, everyone, ("a",), linked, applied) == ("a",)


def test_touched_module_of_modules_classes_and_functions() -> None:
    assert touched_module(sys.modules[__name__]) == __name__
    assert touched_module(Owner) == __name__
    assert touched_module(function) == __name__
    cell = _closure_cell()
    assert touched_module(cell, function) == __name__  # a decorator's cell: the function it holds
    assert point_names(cell, "cell_contents", function) == {f"{__name__}.function"}


def _closure_cell():
    held = function

    def wrapper() -> None:
        held()

    return wrapper.__closure__[0]
