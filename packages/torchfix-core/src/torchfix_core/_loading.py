"""Load the scanned fix entry points into specs and put them in a safe order (:func:`discover`);
read the family (:func:`family`) and catalog (:func:`catalog`) groups.

Loading an entry point imports only the fix's data-only ``package`` module. Every problem is
reported per fix, never skipped silently: an entry point that cannot be imported, one that does
not load a :class:`FixSpec`, an id that differs from the entry-point name, an id registered twice,
an ``after`` naming an unknown fix, and ``after`` cycles each mark the fixes involved ``failed``
with a reason naming the problem.

Imported by the registry when it discovers the fixes (the first trigger's import, or a caller
asking for status), never at ``import torch``: the scan that runs there is
:mod:`torchfix_core._discovery`.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Iterable

from torchfix_core._discovery import CATALOG_GROUP, FAMILY_GROUP, scan_entry_points

if TYPE_CHECKING:
    from torchfix_core.spec import FixSpec

__all__ = ["Discovered", "catalog", "discover", "family", "order"]


class Discovered:
    """One entry point of the group, loaded or not. ``distribution`` and ``version`` are read
    from the distribution's METADATA only when asked (doctor), not at ``import torch``."""

    __slots__ = ("id", "spec", "error", "_entry_point", "_meta")

    def __init__(self, id: str, spec: FixSpec | None, entry_point: object, error: str) -> None:
        self.id = id
        self.spec = spec
        self.error = error
        self._entry_point = entry_point
        self._meta: tuple[str, str | None] | None = None

    def _metadata(self) -> tuple[str, str | None]:
        if self._meta is None:
            try:
                dist = getattr(self._entry_point, "dist", None)
                self._meta = (getattr(dist, "name", None) or "?", getattr(dist, "version", None))
            except Exception:  # noqa: BLE001 - unreadable METADATA is shown, not raised
                self._meta = ("?", None)
        return self._meta

    @property
    def distribution(self) -> str:
        return self._metadata()[0]

    @property
    def version(self) -> str | None:
        return self._metadata()[1]


def _load(entry_point: object) -> Discovered:
    from torchfix_core.spec import FixSpec

    name: str = entry_point.name  # type: ignore[attr-defined]
    try:
        spec = entry_point.load()  # type: ignore[attr-defined]
    except BaseException as exc:  # noqa: BLE001 - a broken plugin must not break import torch
        if isinstance(exc, KeyboardInterrupt):
            raise
        value = entry_point.value  # type: ignore[attr-defined]
        return Discovered(
            name, None, entry_point, f"entry point {value!r} cannot be loaded: {type(exc).__name__}: {exc}"
        )
    if not isinstance(spec, FixSpec):
        return Discovered(
            name, None, entry_point, f"entry point loads a {type(spec).__name__}, not a torchfix_core.FixSpec"
        )
    if spec.id != name:
        return Discovered(name, None, entry_point, f"FixSpec id {spec.id!r} differs from its entry-point name {name!r}")
    return Discovered(name, spec, entry_point, "")


def discover(entry_points: Iterable[object] | None = None) -> list[Discovered]:
    """Load every fix of the group and return them in application order (failed ones last)."""
    if entry_points is None:
        entry_points = scan_entry_points()
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
        unknown = [a for a in d.spec.after if a not in by_id]
        if unknown:  # the family is read only here, when an 'after' names an absent fix
            members = family()
            unknown = [a for a in unknown if a not in members]
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


def family() -> dict[str, str]:
    """Every fix id that an installed distribution lists in group ``torchfix.family``, with the
    distribution that provides it. A broken family entry point is reported (one
    ``TorchfixConfigWarning``) and contributes nothing; it never raises."""
    members: dict[str, str] = {}
    for ep in scan_entry_points(FAMILY_GROUP):
        try:
            listed = dict(ep.load())  # type: ignore[attr-defined]
            members.update({str(k): str(v) for k, v in listed.items()})
        except Exception as exc:  # noqa: BLE001 - doctor must answer; the problem is shown
            from torchfix_core._env import warn_once

            value = getattr(ep, "value", "?")
            warn_once(f"torchfix: family entry point {value!r} cannot be loaded: {type(exc).__name__}: {exc}")
    return members


def catalog() -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of every installed ``torchfix.catalog`` entry point, in the order the entry points
    are found, and one problem line per entry point that cannot be loaded or returns something other
    than a list of mappings (that entry point contributes nothing; this never raises)."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for ep in scan_entry_points(CATALOG_GROUP):
        value = getattr(ep, "value", "?")
        try:
            loaded = ep.load()()  # type: ignore[attr-defined]
            if not isinstance(loaded, list) or not all(isinstance(row, dict) for row in loaded):
                raise TypeError(f"returned {type(loaded).__name__}, not a list of mappings")
            rows.extend(loaded)
        except Exception as exc:  # noqa: BLE001 - explain must answer; the problem is shown
            problems.append(f"catalog entry point {value!r} cannot be loaded: {type(exc).__name__}: {exc}")
    return rows, problems
