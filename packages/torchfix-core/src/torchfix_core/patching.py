"""The one patching layer every fix uses: wrap, replace or re-code an attribute, and undo it exactly.

Guarantees, for every patch made through a :class:`PatchSet`:

* **Exact revert.** The object found before patching is kept and put back on revert, so after
  ``revert()`` ``owner.__dict__[name] is original`` (for ``swap_code``: ``func.__code__ is
  original_code``).
* **Idempotent.** Patching the same ``(owner, name)`` twice through one set is a no-op that
  returns the wrapper already installed.
* **Shape checks before touching anything.** A missing attribute, an inherited attribute, an object
  that is not a plain function, or a signature other than the one the fix was written for raises
  :class:`PatchRefused` with the reason. The registry rolls back whatever the fix had already
  patched, so a fix is never left half-applied.
* **Thread-safe.** All mutations hold :data:`PATCH_LOCK` (re-entrant).
* **Polite.** If somebody else re-patched the attribute after us, revert leaves their object in
  place and reports it instead of clobbering it.

Class attributes are read through ``cls.__dict__`` (never ``getattr``), so a ``staticmethod`` or
``classmethod`` is unwrapped, wrapped and re-wrapped in the same descriptor type.

Why not ``wrapt``: the fixes need three operations wrapt does not offer as one reversible unit
(attribute replacement with signature checks, class-dict descriptors kept intact, and
``__code__`` swaps that reach every ``from x import f`` binding), its proxies would change the
identity checks torch itself does on these objects, and importing it at ``import torch`` costs
more than this module. See ``docs/design.md``.

Hazard: a late patch does not reach names already bound elsewhere by ``from mod import f``; use
:meth:`PatchSet.swap_code` (which changes the function object in place) when that matters.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Sequence

#: Held while any torchfix patch or revert runs, and by the registry around state changes
#: (defined in the leaf torchfix_core._import_hooks, which activation loads anyway).
from torchfix_core._import_hooks import PATCH_LOCK as PATCH_LOCK

_MARK = "__torchfix_fix__"


class PatchRefused(Exception):
    """The target does not have the shape the fix expects; nothing was patched."""


def _describe(owner: object, name: str) -> str:
    base = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", None) or type(owner).__name__
    module = getattr(owner, "__module__", None) if isinstance(owner, type) else None
    return f"{module}.{base}.{name}" if module else f"{base}.{name}"


def _parameters(func: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(func).parameters)


def read_raw(owner: object, name: str) -> Any:
    """Return the attribute exactly as stored on ``owner`` (class ``__dict__`` for classes).

    Raises :class:`PatchRefused` when it is missing or, for a class, only inherited.
    """
    if isinstance(owner, type):
        if name not in owner.__dict__:
            inherited = any(name in vars(base) for base in owner.__mro__[1:])
            why = "is inherited, not defined on the class itself" if inherited else "does not exist"
            raise PatchRefused(f"{_describe(owner, name)} {why}")
        return owner.__dict__[name]
    try:
        return getattr(owner, name)
    except AttributeError:
        raise PatchRefused(f"{_describe(owner, name)} does not exist") from None


def check_signature(func: Callable[..., Any], expected: Sequence[str], where: str) -> None:
    """Raise :class:`PatchRefused` unless ``func``'s parameter names are exactly ``expected``."""
    try:
        actual = _parameters(func)
    except (TypeError, ValueError) as exc:
        raise PatchRefused(f"{where}: signature cannot be read ({exc})") from None
    if actual != tuple(expected):
        raise PatchRefused(f"{where} has parameters {actual}, expected {tuple(expected)}")


class _Record:
    __slots__ = ("owner", "name", "original", "installed", "kind")

    def __init__(self, owner: object, name: str, original: Any, installed: Any, kind: str) -> None:
        self.owner = owner
        self.name = name
        self.original = original
        self.installed = installed
        self.kind = kind


class PatchSet:
    """The patches of one fix, revertible as a unit.

    Args:
        fix_id: written on every wrapper as ``__torchfix_fix__`` so doctor and other fixes can
            tell torchfix wrappers apart.
    """

    def __init__(self, fix_id: str) -> None:
        self.fix_id = fix_id
        self._records: dict[tuple[int, str], _Record] = {}

    def __len__(self) -> int:
        return len(self._records)

    def __bool__(self) -> bool:  # an empty set is still a set
        return True

    def wrap(
        self,
        owner: object,
        name: str,
        make_wrapper: Callable[[Callable[..., Any]], Callable[..., Any]],
        *,
        signature: Sequence[str] | None = None,
    ) -> Callable[..., Any]:
        """Replace the function ``owner.name`` by ``make_wrapper(original_function)``.

        The wrapper gets the original's name, docstring and ``__wrapped__``. ``signature`` lists
        the parameter names the fix was written against; any other signature is refused.
        """
        with PATCH_LOCK:
            key = (id(owner), name)
            if key in self._records:
                return self._records[key].installed  # type: ignore[no-any-return]
            raw = read_raw(owner, name)
            where = _describe(owner, name)
            if getattr(raw, _MARK, None) is not None:
                raise PatchRefused(f"{where} is already a torchfix wrapper of {getattr(raw, _MARK)!r}")
            descriptor: type | None = None
            func = raw
            if isinstance(raw, (staticmethod, classmethod)):
                descriptor = type(raw)
                func = raw.__func__
            if not isinstance(func, types.FunctionType):
                raise PatchRefused(f"{where} is a {type(func).__name__}, expected a Python function")
            if signature is not None:
                check_signature(func, signature, where)
            wrapper = make_wrapper(func)
            if getattr(wrapper, "__wrapped__", None) is not func:
                functools.update_wrapper(wrapper, func)
            setattr(wrapper, _MARK, self.fix_id)
            installed: Any = descriptor(wrapper) if descriptor is not None else wrapper
            setattr(owner, name, installed)
            self._records[key] = _Record(owner, name, raw, installed, "attr")
            return installed  # type: ignore[no-any-return]

    def replace(
        self,
        owner: object,
        name: str,
        new: Any,
        *,
        check: Callable[[Any], str | None] | None = None,
    ) -> Any:
        """Set ``owner.name = new``, keeping the original. ``check(original)`` returns a refusal
        reason (or None when the original has the expected shape)."""
        with PATCH_LOCK:
            key = (id(owner), name)
            if key in self._records:
                return self._records[key].installed
            raw = read_raw(owner, name)
            if check is not None:
                problem = check(raw)
                if problem:
                    raise PatchRefused(f"{_describe(owner, name)}: {problem}")
            setattr(owner, name, new)
            self._records[key] = _Record(owner, name, raw, new, "attr")
            return new

    def swap_code(
        self,
        func: Callable[..., Any],
        new_code: types.CodeType,
        *,
        signature: Sequence[str] | None = None,
    ) -> None:
        """Give ``func`` the code object ``new_code`` in place.

        Use it when the function is imported by name into other modules: every binding shares the
        function object, so all of them change. ``new_code`` must have the same free variables.
        """
        with PATCH_LOCK:
            key = (id(func), "__code__")
            if key in self._records:
                return
            where = getattr(func, "__qualname__", repr(func))
            if not isinstance(func, types.FunctionType):
                raise PatchRefused(f"{where} is a {type(func).__name__}, expected a Python function")
            if signature is not None:
                check_signature(func, signature, where)
            original = func.__code__
            if original.co_freevars != new_code.co_freevars:
                raise PatchRefused(
                    f"{where}: free variables {original.co_freevars} differ from the replacement's "
                    f"{new_code.co_freevars}"
                )
            func.__code__ = new_code
            self._records[key] = _Record(func, "__code__", original, new_code, "code")

    def revert(self) -> list[str]:
        """Undo every patch, newest first. Returns the problems met (empty when all went back)."""
        problems: list[str] = []
        with PATCH_LOCK:
            for key in reversed(list(self._records)):
                record = self._records.pop(key)
                if record.kind == "code":
                    func = record.owner
                    if func.__code__ is record.installed:  # type: ignore[attr-defined]
                        func.__code__ = record.original  # type: ignore[attr-defined]
                    else:
                        problems.append(f"{getattr(func, '__qualname__', func)}.__code__ changed after torchfix")
                    continue
                try:
                    current = read_raw(record.owner, record.name)
                except PatchRefused:
                    current = None
                if current is record.installed:
                    setattr(record.owner, record.name, record.original)
                else:
                    problems.append(
                        f"{_describe(record.owner, record.name)} was replaced after torchfix patched it; left as it is"
                    )
        return problems


def is_torchfix_wrapper(obj: object) -> bool:
    """True when ``obj`` (or the function inside a static/class method) was installed by torchfix."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    return getattr(obj, _MARK, None) is not None
