"""Find installed fixes (entry-point group ``torchfix.fixes``) and put them in a safe order.

Loading an entry point imports only the fix's data-only ``package`` module. Every problem is
reported per fix, never skipped silently: an entry point that cannot be imported, one that does
not load a :class:`FixSpec`, an id that differs from the entry-point name, an id registered twice,
an ``after`` naming an unknown fix, and ``after`` cycles each mark the fixes involved ``failed``
with a reason naming the problem.
"""

from __future__ import annotations

import heapq
import os
import pathlib
import re
import sys
from typing import Iterable, Sequence

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
    """One entry point of the group, loaded or not. ``distribution`` and ``version`` are read
    from the distribution's METADATA only when asked (doctor), not at ``import torch``."""

    __slots__ = ("id", "spec", "error", "_dist", "_meta")

    def __init__(self, id: str, spec: FixSpec | None, dist: object, error: str) -> None:
        self.id = id
        self.spec = spec
        self.error = error
        self._dist = dist
        self._meta: tuple[str, str | None] | None = None

    def _metadata(self) -> tuple[str, str | None]:
        if self._meta is None:
            try:
                self._meta = (getattr(self._dist, "name", None) or "?", getattr(self._dist, "version", None))
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
    name: str = entry_point.name  # type: ignore[attr-defined]
    dist = getattr(entry_point, "dist", None)
    try:
        spec = entry_point.load()  # type: ignore[attr-defined]
    except BaseException as exc:  # noqa: BLE001 - a broken plugin must not break import torch
        if isinstance(exc, KeyboardInterrupt):
            raise
        value = entry_point.value  # type: ignore[attr-defined]
        return Discovered(name, None, dist, f"entry point {value!r} cannot be loaded: {type(exc).__name__}: {exc}")
    if not isinstance(spec, FixSpec):
        return Discovered(name, None, dist, f"entry point loads a {type(spec).__name__}, not a torchfix_core.FixSpec")
    if spec.id != name:
        return Discovered(name, None, dist, f"FixSpec id {spec.id!r} differs from its entry-point name {name!r}")
    return Discovered(name, spec, dist, "")


def scan_entry_points(group: str = GROUP, path: Sequence[str] | None = None) -> list[object]:
    """The entry points of ``group`` installed on ``path`` (default ``sys.path``), first
    distribution of a name wins, exactly as :func:`importlib.metadata.entry_points` decides.

    ``importlib.metadata`` parses every distribution's METADATA to learn its name, which costs
    milliseconds at ``import torch``; this scan takes the name from the ``.dist-info`` directory
    (normalized as in PEP 503) and opens ``entry_points.txt`` only. Path entries that are not
    directories (zip files, eggs) are handed to ``importlib.metadata``.
    """
    import importlib.metadata as md

    found: list[object] = []
    seen: set[str] = set()
    header = f"[{group}]"
    for entry in sys.path if path is None else path:
        directory = entry or "."
        try:
            names = os.listdir(directory)
        except OSError:
            if os.path.isfile(directory):
                for dist in md.distributions(path=[directory]):
                    key = _normalize(dist.metadata["Name"] or "")
                    if key not in seen:
                        seen.add(key)
                        found.extend(ep for ep in dist.entry_points if ep.group == group)
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            key = _normalize(name.rpartition(".")[0].split("-")[0])
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(directory, name, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            if header not in text:
                continue
            dist = md.PathDistribution(pathlib.Path(directory, name))
            found.extend(ep for ep in dist.entry_points if ep.group == group)
    return found


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


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
