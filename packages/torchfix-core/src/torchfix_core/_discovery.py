"""Find installed fixes (entry-point group ``torchfix.fixes``) and put them in a safe order.

Loading an entry point imports only the fix's data-only ``package`` module. Every problem is
reported per fix, never skipped silently: an entry point that cannot be imported, one that does
not load a :class:`FixSpec`, an id that differs from the entry-point name, an id registered twice,
an ``after`` naming an unknown fix, and ``after`` cycles each mark the fixes involved ``failed``
with a reason naming the problem.

It also keeps the scan of a **deferred activation** (:class:`Deferral`): activation scans the entry
points at ``import torch`` and hands the scan over here (:func:`defer`) instead of loading the specs;
the registry takes it back (:func:`take_deferral`) when it discovers the fixes. Both sides call these
under :data:`~torchfix_core._import_hooks.PATCH_LOCK`; keeping the scan here, below both, is what lets the
registry finish a deferred activation without importing :mod:`torchfix_core._activation`.
"""

from __future__ import annotations

import heapq
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

if TYPE_CHECKING:
    from torchfix_core.spec import FixSpec

GROUP = "torchfix.fixes"
#: The trigger index: for each fix id of ``torchfix.fixes``, the same distribution registers
#: ``<id> = <module>`` here, the first of the spec's ``triggers`` (written into each package's
#: pyproject.toml by ``scripts/generate.py`` from its specs; CI checks it for drift). It lets
#: activation wait for the first trigger module without loading any spec (:func:`wake_modules`).
TRIGGERS_GROUP = "torchfix.triggers"
#: Entry points of this group load a mapping ``fix id -> distribution``: the members of a family of
#: fixes (torchfix-all registers its generated list). ``status()`` shows a member that is not
#: installed as ``not-installed``, and a fix may name a member in ``after`` without it being
#: installed. The core itself knows no fix.
FAMILY_GROUP = "torchfix.family"
#: Entry points of this group load a callable returning the family's catalog: one mapping per fix
#: (``id``, ``distribution``, ``summary``, ``targets``, ``upstream``, ``page``, ``signatures``), so that
#: ``torchfix-doctor explain`` recognises the failure of a fix that is not installed (torchfix-all
#: registers its generated catalog). Read only by explain, never at ``import torch``.
CATALOG_GROUP = "torchfix.catalog"


class Deferral:
    """An armed deferred activation: the fixes' entry points as scanned (``scanned``), the trigger
    index (fix id -> first trigger module) and ``wake``, the post-import callback registered on the
    wake modules (whoever takes the deferral cancels it)."""

    __slots__ = ("scanned", "index", "wake")

    def __init__(self, scanned: list[object], index: dict[str, str], wake: Callable[[Any], None]) -> None:
        self.scanned = scanned
        self.index = index
        self.wake = wake


_deferral: Deferral | None = None


def defer(deferral: Deferral) -> None:
    """Keep the scan of a deferred activation until the registry takes it (activation calls this
    under ``PATCH_LOCK`` once the wake hooks are registered)."""
    global _deferral
    _deferral = deferral


def deferral() -> Deferral | None:
    """The armed deferred activation, if any."""
    return _deferral


def take_deferral() -> Deferral | None:
    """Disarm the deferred activation and return it (the caller cancels its ``wake`` hook): the
    registry calls this under ``PATCH_LOCK`` when it discovers the fixes."""
    global _deferral
    taken, _deferral = _deferral, None
    return taken


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


class EntryPoint:
    """An entry point read from a ``.dist-info/entry_points.txt`` by :func:`scan_entry_points`.

    Quacks like :class:`importlib.metadata.EntryPoint` as far as discovery needs (``name``,
    ``value``, ``group``, ``dist``, ``load()``), without importing or parsing anything more at
    ``import torch``: ``dist`` (an :class:`importlib.metadata.PathDistribution`, whose METADATA
    gives the name and version shown by doctor) is built on first access.
    """

    __slots__ = ("name", "value", "group", "_path", "_dist")

    def __init__(self, name: str, value: str, group: str, path: str) -> None:
        self.name = name
        self.value = value
        self.group = group
        self._path = path
        self._dist: Any = None

    @property
    def dist(self) -> Any:
        if self._dist is None:
            import importlib.metadata
            import pathlib

            self._dist = importlib.metadata.PathDistribution(pathlib.Path(self._path))
        return self._dist

    def load(self) -> Any:
        """Import the module and resolve the attribute path, as ``importlib.metadata`` does
        (``module:attr.sub [extras]``; extras are ignored)."""
        import importlib

        module_name, _, attrs = self.value.partition("[")[0].partition(":")
        module_name, attrs = module_name.strip(), attrs.strip()
        if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
            raise ValueError(f"malformed entry point value {self.value!r}")
        obj = importlib.import_module(module_name)
        for attr in attrs.split(".") if attrs else ():
            obj = getattr(obj, attr)
        return obj

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _entry_points_in(text: str, group: str, path: str) -> list[EntryPoint]:
    """The entries of section ``[group]`` of an ``entry_points.txt`` (the INI subset that
    ``importlib.metadata`` reads: ``name = value`` lines, ``#``/``;`` comments, blank lines)."""
    found: list[EntryPoint] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section == group:
            name, sep, value = line.partition("=")
            if sep:
                found.append(EntryPoint(name.strip(), value.strip(), group, path))
    return found


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


def scan_entry_points(group: str = GROUP, path: Sequence[str] | None = None) -> list[object]:
    """The entry points of ``group`` installed on ``path`` (default ``sys.path``), first
    distribution of a name wins, exactly as :func:`importlib.metadata.entry_points` decides
    (:func:`scan_groups` with one group)."""
    return scan_groups((group,), path)[group]


def scan_groups(groups: Sequence[str], path: Sequence[str] | None = None) -> dict[str, list[object]]:
    """The entry points of each of ``groups`` installed on ``path`` (default ``sys.path``), in one
    pass over the distributions; first distribution of a name wins, exactly as
    :func:`importlib.metadata.entry_points` decides.

    ``importlib.metadata`` parses every distribution's METADATA to learn its name, which costs
    milliseconds at ``import torch``; this scan takes the name from the ``.dist-info`` directory
    (normalized as in PEP 503), reads ``entry_points.txt`` only (as bytes, parsed only when it
    names one of the groups) and returns :class:`EntryPoint` records whose distribution is read
    lazily. Path entries that are not directories (zip files, eggs) are handed to
    ``importlib.metadata``.
    """
    found: dict[str, list[object]] = {group: [] for group in groups}
    seen: set[str] = set()
    headers = [(group, f"[{group}]".encode()) for group in groups]
    for entry in sys.path if path is None else path:
        directory = entry or "."
        try:
            names = _listdir(entry, directory)
        except OSError:
            if os.path.isfile(directory):
                import importlib.metadata as md

                for dist in md.distributions(path=[directory]):
                    key = _normalize(dist.metadata["Name"] or "")
                    if key not in seen:
                        seen.add(key)
                        for ep in dist.entry_points:
                            if ep.group in found:
                                found[ep.group].append(ep)
            continue
        # sorted: the cached listing is a set, and which of two same-named distributions in one
        # directory wins (and names a duplicate first) must not depend on hash order
        for name in sorted(n for n in names if n.endswith((".dist-info", ".egg-info"))):
            key = _normalize(name.rpartition(".")[0].split("-")[0])
            if key in seen:
                continue
            seen.add(key)
            info = os.path.join(directory, name)
            try:
                with open(os.path.join(info, "entry_points.txt"), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            for group, header in headers:
                if header in data:
                    found[group].extend(_entry_points_in(data.decode("utf-8"), group, info))
    return found


def wake_modules(fixes: Iterable[object], triggers: Iterable[object]) -> list[str] | None:
    """The modules whose import must wake a deferred activation: for every fix entry point, the
    trigger its own distribution publishes in :data:`TRIGGERS_GROUP`. None when any fix lacks
    one (a plugin built without the index, or an index that names a malformed module): then the
    specs must be loaded now, as without an index."""
    published = {(_dist_key(ep), getattr(ep, "name", None)): getattr(ep, "value", "") for ep in triggers}
    modules: set[str] = set()
    for ep in fixes:
        module = str(published.get((_dist_key(ep), getattr(ep, "name", None)), "")).strip()
        if not module or not all(part.isidentifier() for part in module.split(".")):
            return None
        modules.add(module)
    return sorted(modules)


def _dist_key(entry_point: object) -> object:
    """Which distribution an entry point belongs to, without reading its metadata."""
    path = getattr(entry_point, "_path", None)
    if path is not None:
        return path
    dist = getattr(entry_point, "dist", None)  # an importlib.metadata.EntryPoint (zip, egg)
    return getattr(dist, "_path", id(dist))


def _listdir(entry: str, directory: str) -> Iterable[str]:
    """The names in ``directory``. After ``import torch`` the import system's ``FileFinder`` of
    each ``sys.path`` entry already holds that listing (``_path_cache``, refreshed whenever the
    directory's mtime changes); it is reused when its mtime is still current (one ``stat`` instead
    of a ``listdir`` of the standard library). Any doubt -> ``os.listdir``."""
    finder = sys.path_importer_cache.get(entry or os.getcwd())
    cached = getattr(finder, "_path_cache", None)
    if isinstance(cached, set) and cached:
        try:
            if getattr(finder, "_path_mtime", None) == os.stat(directory).st_mtime:
                return cached
        except OSError:
            pass
    return os.listdir(directory)


def _normalize(name: str) -> str:
    """PEP 503: runs of ``-``, ``_`` and ``.`` become one ``-``, lower case (no ``re``: its first
    use compiles the pattern, which activation would pay for)."""
    key = name.replace("_", "-").replace(".", "-").lower()
    while "--" in key:
        key = key.replace("--", "-")
    return key


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
