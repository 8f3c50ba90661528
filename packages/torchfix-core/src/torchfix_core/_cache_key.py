"""The compile caches' key term: an artifact compiled without a fix is never served with it, nor the reverse.

Why
    A fix whose effect is :attr:`Effect.COMPILED` changes what torch compiles (a partition, generated
    code) for a graph torch's own cache keys cannot tell apart: the key is computed from the graph
    *before* the code the fix changes runs. Without a term of its own, an artifact compiled before
    the fix was installed (or while it was disabled) keeps being loaded from the FX graph cache and
    the AOTAutograd cache (local directory, remote caches, mega-cache bundles: they share the keys),
    and the bug comes back with the fix ``applied`` and a report that shows a healthy cache hit.

What
    One wrapper of ``FxGraphHashDetails.__init__`` (``torch/_inductor/codecache.py``), installed by
    the registry when the first compiled-effect fix is applied and removed when the last one is
    reverted. After torch's own ``__init__`` it sets the attribute :data:`ATTRIBUTE` on the object
    the FX graph cache key hashes: a sorted tuple of ``(fix id, distribution version, detail)``, one
    per applied compiled-effect fix, ``detail`` being what :meth:`torchfix_core.Fix.cache_key_detail`
    returns at that moment. ``AOTAutogradCacheDetails`` (``torch/_functorch/_aot_autograd/
    autograd_cache.py``) subclasses it and calls its ``__init__`` (torch 2.8-2.15), so the
    AOTAutograd key carries the same term.

    The attribute is only added (nothing torch records is removed or changed), so two graphs whose
    keys differed still differ; with no compiled-effect fix applied nothing is added and the keys are
    torch's own. A process with the fix therefore misses every entry written without it (one cold
    compile per graph after installing or upgrading the fix), and a process without it misses the
    fix's entries. The term is the same in every process with the same fixes at the same versions,
    so warm caches keep working.

Layout
    ``torch._inductor.codecache`` must be imported (a compiled-effect fix lists it among its
    triggers, :data:`torchfix_core.spec.KEYED_CACHE_MODULE`), ``FxGraphHashDetails`` must be a class
    whose own ``__init__`` is a Python function with the parameters :data:`DETAILS_PARAMETERS`, and
    ``AOTAutogradCacheDetails``, where its module is imported, must subclass it; anything else raises
    :class:`PatchRefused` before a term is added, and the registry then refuses the fix: a fix whose
    artifacts a warm cache could undo is not applied half.

Cost: per key computed (once per compile or cache lookup, never per step), one dict read and, when
a term is held, one tuple of a few strings. Imported by the registry only when a compiled-effect fix
is applied, never at ``import torch``.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable

from torchfix_core._import_hooks import PATCH_LOCK
from torchfix_core.patching import PatchRefused, PatchSet
from torchfix_core.probes import imported_module
from torchfix_core.spec import KEYED_CACHE_MODULE

if TYPE_CHECKING:
    from torchfix_core.fix import Fix

__all__ = [
    "ATTRIBUTE",
    "AUTOGRAD_CACHE_MODULE",
    "DETAILS",
    "DETAILS_PARAMETERS",
    "KEY_PATCH_ID",
    "add_term",
    "key_patches",
    "remove_term",
    "terms",
]

DETAILS = "FxGraphHashDetails"
#: the parameters of ``FxGraphHashDetails.__init__`` on torch 2.8.0-2.15.0
DETAILS_PARAMETERS = ("self", "gm", "example_inputs", "fx_kwargs", "inputs_to_check")
AUTOGRAD_CACHE_MODULE = "torch._functorch._aot_autograd.autograd_cache"
AUTOGRAD_DETAILS = "AOTAutogradCacheDetails"
#: the attribute the key hashes: ``((fix id, version, detail), ...)``, sorted by fix id
ATTRIBUTE = "torchfix_fixes"
#: the mark on the wrapper (``__torchfix_fix__``): the core's, shared by every compiled-effect fix
KEY_PATCH_ID = "torchfix-core:cache-key"

#: fix id -> (distribution version, the fix's implementation); read by the wrapper on every key.
#: Copy on write (add/remove rebind a new dict under PATCH_LOCK), so the wrapper reads one consistent
#: dict without taking the lock while another thread applies or reverts a fix.
_terms: dict[str, tuple[str, Fix]] = {}
_patches = PatchSet(KEY_PATCH_ID)


def _details_class() -> type:
    details = vars(imported_module(KEYED_CACHE_MODULE)).get(DETAILS)
    if not isinstance(details, type):
        raise PatchRefused(f"{KEYED_CACHE_MODULE}.{DETAILS} is {details!r}, expected a class: unknown cache layout")
    autograd = sys.modules.get(AUTOGRAD_CACHE_MODULE)
    subclass = vars(autograd).get(AUTOGRAD_DETAILS) if autograd is not None else None
    if autograd is not None and not (isinstance(subclass, type) and issubclass(subclass, details)):
        raise PatchRefused(
            f"{AUTOGRAD_CACHE_MODULE}.{AUTOGRAD_DETAILS} is not a subclass of {DETAILS}: the AOTAutograd key "
            "would not carry the term"
        )
    return details


def term_tuple(held: dict[str, tuple[str, Fix]] | None = None) -> tuple[tuple[str, str, str], ...]:
    """The term a key gets from ``held`` (default: the terms now): ``(fix id, version, detail)`` per
    term, sorted by fix id."""
    held = _terms if held is None else held
    return tuple((fix_id, version, impl.cache_key_detail()) for fix_id, (version, impl) in sorted(held.items()))


def _keyed(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        held = _terms  # one read: add/remove rebind, never mutate
        if held:
            setattr(self, ATTRIBUTE, term_tuple(held))

    return __init__


def add_term(fix_id: str, version: str | None, impl: Fix) -> None:
    """Key the FX graph and AOTAutograd caches on ``fix_id`` at ``version`` from now on (idempotent).

    Installs the wrapper with the first term. Raises :class:`PatchRefused` (nothing added, nothing
    patched) when the cache module is not imported or its layout is unknown."""
    global _terms
    with PATCH_LOCK:
        if not len(_patches):  # the first term: the layout checks, then the one wrapper
            _patches.wrap(_details_class(), "__init__", _keyed, signature=DETAILS_PARAMETERS)
        _terms = {**_terms, fix_id: (version or "unknown", impl)}


def remove_term(fix_id: str) -> list[str]:
    """Stop keying on ``fix_id``; with the last term gone, put torch's ``__init__`` back. Returns the
    problems of that revert (empty when it went back, or when a term remains)."""
    global _terms
    with PATCH_LOCK:
        _terms = {key: value for key, value in _terms.items() if key != fix_id}
        if _terms:
            return []
        return _patches.revert()


def terms() -> dict[str, str]:
    """Fix id -> version of every term the keys carry now. The details are not read here: a fix may
    count each read as a key computed (only the wrapper reads them)."""
    with PATCH_LOCK:
        return {fix_id: version for fix_id, (version, _) in _terms.items()}


def key_patches() -> list[tuple[object, str, Any]]:
    """``(owner, name, original)`` of the wrapper while it is installed (for the test hooks)."""
    with PATCH_LOCK:
        return [(r.owner, r.name, r.original) for r in _patches._records.values()]
