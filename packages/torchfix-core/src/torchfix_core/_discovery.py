"""Find installed fixes (entry-point group ``torchfix.fixes``) and put them in a safe order.

Loading an entry point imports only the fix's data-only ``package`` module. Every problem is
reported per fix, never skipped silently: an entry point that cannot be imported, one that does
not load a :class:`FixSpec`, an id that differs from the entry-point name, an id registered twice,
an ``after`` naming an unknown fix, and ``after`` cycles each mark the fixes involved ``failed``
with a reason naming the problem.
"""

from __future__ import annotations

import heapq
from typing import Iterable

from torchfix_core.spec import FixSpec

GROUP = "torchfix.fixes"

#: The torchfix family: fixes that ``status()`` lists as not-installed when they are absent, and
#: that another fix may name in ``after`` without being installed.
FAMILY: dict[str, str] = {
    "autotune": "torchfix-autotune",
    "sac-replay": "torchfix-sac-replay",
    "fp8-recompute": "torchfix-fp8-recompute",
    "placement-cache": "torchfix-placement-cache",
    "aot-fallback": "torchfix-aot-fallback",
}


class Discovered:
    """One entry point of the group, loaded or not."""

    __slots__ = ("id", "spec", "distribution", "version", "error")

    def __init__(self, id: str, spec: FixSpec | None, distribution: str, version: str | None, error: str) -> None:
        self.id = id
        self.spec = spec
        self.distribution = distribution
        self.version = version
        self.error = error


def _load(entry_point: object) -> Discovered:
    name: str = entry_point.name  # type: ignore[attr-defined]
    dist = getattr(entry_point, "dist", None)
    distribution = getattr(dist, "name", None) or "?"
    version = getattr(dist, "version", None)
    try:
        spec = entry_point.load()  # type: ignore[attr-defined]
    except BaseException as exc:  # noqa: BLE001 - a broken plugin must not break import torch
        if isinstance(exc, KeyboardInterrupt):
            raise
        value = entry_point.value  # type: ignore[attr-defined]
        return Discovered(name, None, distribution, version, f"entry point {value!r} cannot be loaded: {type(exc).__name__}: {exc}")
    if not isinstance(spec, FixSpec):
        return Discovered(name, None, distribution, version, f"entry point loads a {type(spec).__name__}, not a torchfix_core.FixSpec")
    if spec.id != name:
        return Discovered(name, None, distribution, version, f"FixSpec id {spec.id!r} differs from its entry-point name {name!r}")
    return Discovered(name, spec, distribution, version, "")


def discover(entry_points: Iterable[object] | None = None) -> list[Discovered]:
    """Load every fix of the group and return them in application order (failed ones last)."""
    if entry_points is None:
        from importlib.metadata import entry_points as _eps

        entry_points = _eps(group=GROUP)
    found: dict[str, Discovered] = {}
    duplicates: list[Discovered] = []
    for ep in entry_points:
        item = _load(ep)
        if item.id in found:
            first = found[item.id]
            item.spec = None
            item.error = f"fix id {item.id!r} is registered by both {first.distribution} and {item.distribution}"
            first.spec = None
            first.error = item.error
            duplicates.append(item)
        else:
            found[item.id] = item
    ordered = order([d for d in found.values() if d.spec is not None])
    failed = [d for d in found.values() if d.spec is None] + duplicates
    return ordered + sorted(failed, key=lambda d: d.id)


def order(items: list[Discovered]) -> list[Discovered]:
    """Topological order by ``after``, ties by ``(order, id)``; marks bad constraints failed."""
    by_id = {d.id: d for d in items}
    for d in items:
        assert d.spec is not None
        unknown = [a for a in d.spec.after if a not in by_id and a not in FAMILY]
        if unknown:
            d.error = f"'after' names unknown fix id(s) {unknown}"
    valid = {d.id: d for d in items if not d.error}
    deps = {i: {a for a in d.spec.after if a in valid} for i, d in valid.items()}  # type: ignore[union-attr]
    users: dict[str, set[str]] = {i: set() for i in valid}
    for i, before in deps.items():
        for b in before:
            users[b].add(i)
    key = {i: (d.spec.order, i) for i, d in valid.items()}  # type: ignore[union-attr]
    ready = [key[i] for i, before in deps.items() if not before]
    heapq.heapify(ready)
    result: list[Discovered] = []
    while ready:
        _, i = heapq.heappop(ready)
        result.append(valid[i])
        for user in sorted(users[i]):
            deps[user].discard(i)
            if not deps[user]:
                heapq.heappush(ready, key[user])
    stuck = sorted(i for i, before in deps.items() if before)
    for i in stuck:
        cycle = " -> ".join([i, *sorted(deps[i])])
        valid[i].error = f"'after' constraints form a cycle among {stuck} ({cycle})"
    return result + [d for d in items if d.error]
