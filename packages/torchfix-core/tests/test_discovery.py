"""Ordering and discovery errors (plain entry-point records; real ones are covered by the
subprocess tests with installed test-tree distributions)."""

from __future__ import annotations

from types import SimpleNamespace

from torchfix_core._loading import discover
from torchfix_core.spec import FixSpec


def ep(name: str, spec: object = None, error: BaseException | None = None, dist: str = "d"):
    def load():
        if error is not None:
            raise error
        return spec

    return SimpleNamespace(
        name=name, value=f"pkg.{name}:FIX", load=load, dist=SimpleNamespace(name=dist, version="1.0")
    )


def spec(id: str, order: int = 100, after: tuple[str, ...] = ()) -> FixSpec:
    return FixSpec(
        id=id, summary="", implementation="m:C", distribution="d", targets={}, triggers=("m",), order=order, after=after
    )


def ids(found):
    return [(d.id, d.error) for d in found]


def test_order_by_order_then_id_and_after() -> None:
    found = discover(
        [ep("b", spec("b")), ep("a", spec("a")), ep("z", spec("z", order=1)), ep("c", spec("c", order=0, after=("b",)))]
    )
    assert [d.id for d in found] == ["z", "a", "b", "c"]
    assert all(not d.error for d in found)


def test_after_a_family_member_that_is_not_installed_is_fine() -> None:
    found = discover([ep("x", spec("x", after=("autotune",)))])
    assert ids(found) == [("x", "")]


def test_cycle_and_unknown_after_fail_with_a_reason() -> None:
    found = discover(
        [
            ep("a", spec("a", after=("b",))),
            ep("b", spec("b", after=("a",))),
            ep("u", spec("u", after=("ghost",))),
            ep("ok", spec("ok")),
        ]
    )
    errors = dict(ids(found))
    assert errors["ok"] == ""
    assert "cycle" in errors["a"] and "cycle" in errors["b"]
    assert "unknown fix id(s) ['ghost']" in errors["u"]
    assert found[0].id == "ok"


def test_broken_entry_points_are_reported_not_skipped() -> None:
    found = discover(
        [
            ep("imp", error=ImportError("no module named x")),
            ep("data", spec={"id": "data"}),
            ep("named", spec("other")),
            ep("dup", spec("dup"), dist="one"),
            ep("dup", spec("dup"), dist="two"),
        ]
    )
    errors = dict(ids(found))
    assert "cannot be loaded: ImportError: no module named x" in errors["imp"]
    assert "not a torchfix_core.FixSpec" in errors["data"]
    assert "differs from its entry-point name" in errors["named"]
    assert "registered by both one and two" in errors["dup"]
    assert len(found) == 5


def test_after_names_a_member_of_an_installed_family_only() -> None:
    """The family comes from installed ``torchfix.family`` entry points (here the test-tree
    torchfix-demo-dynamo's), not from a list in the core."""
    from torchfix_core._loading import family

    members = family()
    assert members.get("demo-absent") == "torchfix-demo-absent"
    assert ids(discover([ep("x", spec("x", after=("demo-absent",)))])) == [("x", "")]
