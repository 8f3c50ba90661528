"""Find installed fixes: the entry points of ``torchfix.fixes`` and of the groups beside it, read
from each distribution's ``entry_points.txt`` without loading anything (:func:`scan_groups`).

This is the part of discovery that runs at ``import torch`` (activation scans the entry points and
waits for the trigger index's modules: :func:`wake_modules`), so it holds nothing else; loading the
entry points into specs, ordering them and reading the family and catalog groups is
:mod:`torchfix_core._loading`, imported by the registry when the fixes are discovered.

It also keeps the scan of a **deferred activation** (:class:`Deferral`): activation scans the entry
points at ``import torch`` and hands the scan over here (:func:`defer`) instead of loading the specs;
the registry takes it back (:func:`take_deferral`) when it discovers the fixes. Both sides call these
under :data:`~torchfix_core._import_hooks.PATCH_LOCK`; keeping the scan here, below both, is what lets the
registry finish a deferred activation without importing :mod:`torchfix_core._activation`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable, Sequence

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
