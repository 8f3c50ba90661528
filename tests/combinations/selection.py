"""Which subsets of the family's fixes the combination suite installs (pure Python, no torch).

With n fixes there are 2^n - 1 non-empty subsets (255 for 8, 4095 for 12): too many to install and
reproduce on every torch release. :func:`select` keeps the subsets where an interaction can hide:

* every fix alone, all of them together, and every pair;
* every subset of each **group**: fixes that meet at one place, found from the fixes' own data
  (:func:`groups`), never listed by hand:

  - ``distribution``: the fixes of one distribution (installed together, switched one by one);
  - ``trigger``: fixes whose trigger modules are the same module or one inside the other's package
    (importing ``torch._dynamo.aot_compile`` imports ``torch._dynamo`` first, so both fixes are
    applied from one import), connected transitively;
  - ``after``: fixes joined by ``FixSpec.after`` edges, connected transitively;
  - ``patch point``: fixes that patch the same attribute or function on this torch, connected
    transitively (see :func:`point_names` and ``_patch_points.py``).

A group of two adds nothing beyond its pair; a group of three or more adds its triples and up.

Subsets are of **fix ids**, not of distributions: a distribution may hold several fixes. A subset
is realized (:func:`realize`) by installing the distributions that hold its fixes and switching the
other fixes of those distributions off (``TORCHFIX_<ID>_ENABLED=0``); so "a fix alone" is literally
one fix active, and every distribution alone is covered too (its fixes form a ``distribution``
group: all of them together is a subset of it).

The fixes' data come from their ``package.py`` (:func:`load_facts`: each ``torchfix.fixes`` entry
point, read with ``scripts/family.py``, is loaded from the source tree; ``package.py`` imports only
``torchfix_core.spec``), and the patch points from a probe run on the session's torch
(``_patch_points.py``), passed in as ``patch_points``.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from dataclasses import dataclass
from math import comb
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[2]

Subset = tuple[str, ...]  # fix ids, sorted


@dataclass(frozen=True)
class FixFacts:
    """What the selection needs to know about one fix."""

    id: str
    distribution: str  # the package directory name, e.g. ``torchfix-placement-cache``
    triggers: tuple[str, ...]
    after: tuple[str, ...] = ()
    patch_points: frozenset[str] = frozenset()
    #: the modules whose objects its live patches change on this torch (the owner's module: a
    #: patched module itself, a patched class's ``__module__``, a swapped function's ``__module__``)
    touched: frozenset[str] = frozenset()
    #: where each live patch can be met (``_patch_points.py``): ``("code", key, module)`` where the
    #: original is a Python function that matters only when it runs (``key``: its code's
    #: ``file:line:name``; ``module``: the touched module), else ``("module", module, module)``:
    #: met wherever that module is imported
    reach: frozenset[tuple[str, str, str]] = frozenset()
    #: the modules of the libraries its apply imports beyond its trigger modules (measured in a
    #: fresh interpreter)
    apply_imports: frozenset[str] = frozenset()
    #: the modules of its own distribution's package loaded once it is applied (or its probe ran)
    own_modules: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Reached:
    """What one fix's reproduction reached when it ran alone (subset ``{fix}``), over every
    interpreter it started: the modules imported, the code keys (``file:line:name``) of every
    Python function that ran or that Dynamo traced, and the names that code uses
    (``test_combinations.py``'s recorder). ``opaque`` says why codes and names cannot be trusted
    (Python ran on a thread the recorder does not see): then only modules count (:func:`channels`)."""

    modules: frozenset[str]
    codes: frozenset[str] = frozenset()
    #: the names the code that ran uses (``co_names``, parts of dotted string constants)
    names: frozenset[str] = frozenset()
    opaque: str = ""


@dataclass(frozen=True)
class Group:
    """Fixes that meet at one place: ``kind`` (distribution, trigger, after, patch point), ``key`` (what
    they share: the distribution, the modules, the points) and ``members`` (sorted fix ids)."""

    kind: str
    key: str
    members: Subset


# ---------------------------------------------------------------------------------------- the data


def _family() -> Any:
    scripts = str(ROOT / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import family

    return family


def load_specs() -> dict[str, tuple[str, Any]]:
    """fix id -> (package directory name, its ``FixSpec``), for every ``torchfix.fixes`` entry point
    of every fix distribution in ``packages/``, loaded from the source tree (not from what is installed)."""
    family = _family()
    specs: dict[str, tuple[str, Any]] = {}
    for package in family.fix_packages():
        modules: dict[str, types.ModuleType] = {}
        for fix_id, target in family.fix_entry_points(package).items():
            module_name, _, attribute = target.partition(":")
            if module_name not in modules:
                path = package / "src" / Path(*module_name.split(".")).with_suffix(".py")
                loader = importlib.util.spec_from_file_location(f"_combinations_spec_{len(specs)}", path)
                if loader is None or loader.loader is None:
                    raise RuntimeError(f"{package.name}: cannot load {path} (entry point {fix_id} = {target})")
                module = importlib.util.module_from_spec(loader)
                loader.loader.exec_module(module)
                modules[module_name] = module
            spec = getattr(modules[module_name], attribute)
            if spec.id != fix_id:
                raise RuntimeError(f"{package.name}: entry point {fix_id!r} loads the spec of {spec.id!r}")
            specs[fix_id] = (package.name, spec)
    return dict(sorted(specs.items()))


def load_facts(
    patch_points: Mapping[str, Iterable[str]] | None = None,
    touched: Mapping[str, Iterable[str]] | None = None,
    reach: Mapping[str, Iterable[Sequence[str]]] | None = None,
    apply_imports: Mapping[str, Iterable[str]] | None = None,
    own_modules: Mapping[str, Iterable[str]] | None = None,
) -> list[FixFacts]:
    """Every fix of the family (by id), with what the probes found on this torch (none when omitted):
    patch points, touched modules, reach entries, the library modules its apply imports, the
    modules of its own distribution it loads."""
    points, modules, reaches, imports = patch_points or {}, touched or {}, reach or {}, apply_imports or {}
    own = own_modules or {}
    return [
        FixFacts(
            id=fix_id,
            distribution=package,
            triggers=tuple(spec.triggers),
            after=tuple(spec.after),
            patch_points=frozenset(points.get(fix_id, ())),
            touched=frozenset(modules.get(fix_id, ())),
            reach=frozenset(tuple(entry) for entry in reaches.get(fix_id, ())),  # type: ignore[misc]
            apply_imports=frozenset(imports.get(fix_id, ())),
            own_modules=frozenset(own.get(fix_id, ())),
        )
        for fix_id, (package, spec) in load_specs().items()
    ]


def _qualified(obj: object) -> str:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None)
    return f"{module}.{qualname}" if module else str(qualname)


def touched_module(owner: object, original: object = None) -> str:
    """The module whose object one live patch changes: the owner itself when it is a module, the
    owner's ``__module__`` for a class or a function (whose ``__code__`` is swapped), and for a
    closure cell (a decorator's wrapper holding the library's function) the held function's module."""
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    if isinstance(owner, types.CellType):
        return str(getattr(original, "__module__", None) or "builtins")
    return str(getattr(owner, "__module__", None) or type(owner).__module__)


def point_names(owner: object, name: str, original: object) -> frozenset[str]:
    """Names of the place one live patch ``(owner, name, original)`` (as
    ``torchfix_core.testing.live_patches`` lists it) changes: the attribute (``module.Class.attr``,
    ``module.attr``; for a code swap, the function itself) and, when the original is a function
    (also inside a static/class method or a property), the function's own ``module.qualname``, so that
    a wrap of a re-exported name and a code swap of the function it names meet."""
    if isinstance(owner, types.CellType):  # a closure cell: the place is the function it holds
        names = set()
    else:
        names = {_qualified(owner) if name == "__code__" else f"{_qualified(owner)}.{name}"}
    target = original
    if isinstance(target, (staticmethod, classmethod)):
        target = target.__func__
    elif isinstance(target, property):
        target = target.fget
    if isinstance(target, types.FunctionType):
        names.add(_qualified(target))
    return frozenset(names)


# ---------------------------------------------------------------------------------------- groups


def _components(ids: Sequence[str], linked: Iterable[tuple[str, str]]) -> list[Subset]:
    """Connected components (of two or more) of the graph on ``ids`` with the edges ``linked``."""
    parent = {i: i for i in ids}

    def find(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in linked:
        if a in parent and b in parent:
            parent[find(a)] = find(b)
    members: dict[str, list[str]] = {}
    for i in ids:
        members.setdefault(find(i), []).append(i)
    return sorted(tuple(sorted(m)) for m in members.values() if len(m) > 1)


def _nested(a: str, b: str) -> bool:
    """The same module, or one inside the other's package."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def groups(fixes: Sequence[FixFacts]) -> list[Group]:
    """The groups of two or more fixes that meet at one place (module docstring), by kind."""
    by_id = {f.id: f for f in fixes}
    ids = sorted(by_id)
    pairs = list(itertools.combinations(ids, 2))
    found: list[Group] = []

    dists: dict[str, list[str]] = {}
    for f in fixes:
        dists.setdefault(f.distribution, []).append(f.id)
    found += [Group("distribution", d, tuple(sorted(m))) for d, m in sorted(dists.items()) if len(m) > 1]

    def shared(members: Subset, values: Any) -> str:
        return ", ".join(sorted({v for i in members for v in values(by_id[i])}))

    edges = [(a, b) for a, b in pairs if any(_nested(x, y) for x in by_id[a].triggers for y in by_id[b].triggers)]
    found += [Group("trigger", shared(m, lambda f: f.triggers), m) for m in _components(ids, edges)]

    edges = [(f.id, other) for f in fixes for other in f.after]
    found += [Group("after", "after: " + shared(m, lambda f: f.after), m) for m in _components(ids, edges)]

    edges = [(a, b) for a, b in pairs if by_id[a].patch_points & by_id[b].patch_points]
    for m in _components(ids, edges):
        common = {p for a, b in itertools.combinations(m, 2) for p in by_id[a].patch_points & by_id[b].patch_points}
        found.append(Group("patch point", ", ".join(sorted(common)), m))
    return found


# ---------------------------------------------------------------------------------------- channels


def channels(fixes: Sequence[FixFacts], reached: Mapping[str, Reached]) -> dict[tuple[str, str], list[str]]:
    """``(g, f) -> the ways g's presence can change what f's reproduction sees`` (pairs with none
    are left out). ``reached``: fix id -> what its reproduction reached alone (:class:`Reached`).
    The ways (docs/design.md, "Why a pair runs a reproduction only where a channel exists"):

    * ``distribution``: one distribution whose fixes share a module beyond its declarations
      (:func:`shared_modules`; without ``own_modules`` measured, any two of one distribution);
    * ``trigger``: nested trigger modules (one import applies both);
    * ``after``: an ``after`` edge either way (application order);
    * ``patch point``: both patch one attribute or function;
    * and only where f's run alone imports all of g's trigger modules (else g is never applied in
      f's run):

      - ``reached``: a live patch of g is met in f's run: its original function's code ran or
        was traced (``code`` entries), code that ran names the attribute in a run that imported
        its module (``name`` entries), or its module was imported (``module`` entries, and every
        entry where f's record is ``opaque``);
      - ``apply imports``: g's apply imports modules f's run alone did not.

    A fix that is not applied on this torch has no live patches: only the first three can link it.
    """
    found: dict[tuple[str, str], list[str]] = {}
    for g in fixes:
        for f in fixes:
            if g.id == f.id:
                continue
            why = []
            if g.distribution == f.distribution:
                common = shared_modules(g, f)
                if common is None:
                    why.append(f"distribution {f.distribution}")
                elif common:
                    why.append(f"distribution {f.distribution} (shared {', '.join(common)})")
            if any(_nested(x, y) for x in g.triggers for y in f.triggers):
                why.append("trigger")
            if f.id in g.after or g.id in f.after:
                why.append("after")
            shared = g.patch_points & f.patch_points
            if shared:
                why.append("patch point " + ", ".join(sorted(shared)))
            seen = reached.get(f.id)
            if seen is not None and all(t in seen.modules for t in g.triggers):
                met = sorted(_label(entry) for entry in g.reach if _met(entry, seen))
                if met:
                    why.append("reached " + ", ".join(met))
                new = sorted(g.apply_imports - seen.modules)
                if new:
                    why.append("apply imports " + ", ".join(new))
            if why:
                found[(g.id, f.id)] = why
    return found


#: the modules of a fix distribution's package that every fix of it loads and that hold
#: declarations only (test_combinations.py checks that they do): ``__init__``, ``package``, ``version``
DECLARATIONS = ("", ".package", ".version")


def shared_modules(g: FixFacts, f: FixFacts) -> list[str] | None:
    """The modules of their distribution that both g and f load, beyond its declarations; None
    when either was not measured."""
    if not g.own_modules or not f.own_modules:
        return None
    tops = {m.split(".")[0] for m in g.own_modules | f.own_modules}
    declared = {top + suffix for top in tops for suffix in DECLARATIONS}
    return sorted((g.own_modules & f.own_modules) - declared)


def _met(entry: tuple[str, str, str], seen: Reached) -> bool:
    kind, key, module = entry
    if seen.opaque or kind == "module":
        return module in seen.modules
    if kind == "code":
        return key in seen.codes
    return module in seen.modules and key in seen.names


def _label(entry: tuple[str, str, str]) -> str:
    kind, key, module = entry
    if kind == "code":
        return f"{module}:{key.rpartition(':')[2]}"
    return f"{module}.{key}" if kind == "name" else module


def reproduce_in(
    subset: Subset,
    everyone: Sequence[str],
    reproducible: Iterable[str],
    linked: Mapping[tuple[str, str], list[str]],
    applied: Iterable[str],
) -> tuple[str, ...]:
    """The fixes of ``subset`` whose reproduction (red without / green with) runs in it:

    * the whole family (``everyone``): every fix that has a reproduction (``reproducible``);
    * a single fix: its own (the run alone, which also records what the reproduction reaches:
      :class:`Reached`, the input of :func:`channels`);
    * a pair: each fix the other can affect (:func:`channels`) and that is ``applied`` on this torch
      (a fix that is not applied has nothing to show red/green: its nodes would pass or skip);
    * a group's larger subsets: none. They check discovery, order, states and co-existence, and
      each 2-way channel among their members is run as a pair.
    """
    can = set(reproducible)
    if set(subset) == set(everyone) or len(subset) == 1:
        return tuple(f for f in subset if f in can)
    if len(subset) != 2:
        return ()
    active = can & set(applied)
    a, b = subset
    return tuple(f for f, other in ((a, b), (b, a)) if f in active and (other, f) in linked)


# ---------------------------------------------------------------------------------------- subsets


def _nonempty_subsets(ids: Sequence[str], smallest: int = 1) -> Iterator[Subset]:
    ordered = sorted(ids)
    for n in range(smallest, len(ordered) + 1):
        yield from itertools.combinations(ordered, n)


def select(fixes: Sequence[FixFacts]) -> dict[Subset, list[str]]:
    """The subsets to run -> why each is there (``alone``, ``pair``, ``all``, ``<kind> group: <key>``),
    smallest first, then by ids."""
    ids = sorted(f.id for f in fixes)
    chosen: dict[Subset, list[str]] = {}

    def add(subset: Subset, why: str) -> None:
        reasons = chosen.setdefault(subset, [])
        if why not in reasons:
            reasons.append(why)

    for one in ids:
        add((one,), "alone")
    for pair in itertools.combinations(ids, 2):
        add(pair, "pair")
    if ids:
        add(tuple(ids), "all")
    for group in groups(fixes):
        for subset in _nonempty_subsets(group.members, smallest=3):
            add(subset, f"{group.kind} group: {group.key}")
    return dict(sorted(chosen.items(), key=lambda item: (len(item[0]), item[0])))


def powerset(fixes: Sequence[FixFacts]) -> dict[Subset, list[str]]:
    """Every non-empty subset (2^n - 1), as :func:`select` returns them."""
    return {subset: ["power set"] for subset in _nonempty_subsets([f.id for f in fixes])}


def selection_size(n: int, group_sizes: Iterable[int] = ()) -> int:
    """An upper bound of ``len(select(...))`` for ``n`` fixes and disjoint groups of the given sizes:
    n + C(n, 2) + 1 + the sum over groups of their subsets of three or more (2^g - 1 - g - C(g, 2));
    exact when the groups are disjoint and none is the whole family."""
    extra = sum(2**g - 1 - g - comb(g, 2) for g in group_sizes if g >= 3)
    return n + comb(n, 2) + (1 if n > 2 else 0) + extra


def realize(subset: Subset, fixes: Sequence[FixFacts]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(distributions to install, fix ids of those distributions to switch off)`` for ``subset``."""
    by_id = {f.id: f for f in fixes}
    unknown = sorted(set(subset) - set(by_id))
    if unknown:
        raise KeyError(f"not fixes of the family: {unknown}")
    dists = sorted({by_id[i].distribution for i in subset})
    off = sorted(f.id for f in fixes if f.distribution in dists and f.id not in subset)
    return tuple(dists), tuple(off)


def enabled_variable(fix_id: str) -> str:
    """``TORCHFIX_MY_FIX_ENABLED`` for ``my-fix`` (torchfix_core's per-fix switch; it wins over
    ``TORCHFIX_DISABLE``)."""
    return f"TORCHFIX_{fix_id.upper().replace('-', '_')}_ENABLED"
