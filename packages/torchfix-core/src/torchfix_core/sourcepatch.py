"""Recompiling a library function from its module's source, with a few lines changed.

A fix that must change one line inside a function (a line of a nested closure, a string a generator
emits) cannot wrap the function: it recompiles the source with the edit and swaps the function's
code object (:meth:`torchfix_core.patching.PatchSet.swap_code`). The steps, each refusing with
:class:`~torchfix_core.patching.PatchRefused` and a reason rather than guessing:

1. :func:`module_source` - the text of the function's module as the interpreter loaded it
   (``linecache``), and :func:`source_span` - the function's lines in it, which must start where its
   code object says;
2. :func:`require_reproduces` - the unchanged text, compiled whole, must give back the running code
   (:func:`torchfix_core.probes.same_code`): an edited, stale or generated source file is refused;
3. the fix edits its copy of the lines, :func:`compile_module` compiles them under a pseudo filename
   of its own (register the lines with ``linecache`` for tracebacks), :func:`code_at` takes the new
   code object of the function.

:func:`reproduced_source` does steps 1 and 2 at once and returns a :class:`FunctionSource`, whose
:meth:`~FunctionSource.recompile` does step 3 and refuses a patched function whose free variables
differ (its closure could not be kept).

The whole module is compiled, never the function alone: CPython's code generation depends on
module-level facts (3.11 loads an attribute of an imported module with ``LOAD_ATTR`` and of any
other global with ``LOAD_METHOD``), so only the whole text reproduces the running bytecode. Imported
by fix implementations when they are probed, never at activation.
"""

from __future__ import annotations
import __future__

import inspect
import linecache
import types
from dataclasses import dataclass

from torchfix_core.patching import PatchRefused
from torchfix_core.probes import nested_code, same_code


def module_source(func: types.FunctionType) -> list[str]:
    """The lines (each ending in a newline) of the file ``func`` was compiled from, as ``linecache``
    holds it for the interpreter (a zipped or generated module included)."""
    lines = linecache.getlines(func.__code__.co_filename, func.__globals__)
    if not lines:
        raise PatchRefused(f"{func.__qualname__}: the source of {func.__code__.co_filename} is not available")
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def source_span(func: types.FunctionType) -> tuple[int, int]:
    """The function's lines ``[start, stop)`` (1-based) in its module source; ``start`` must be its
    code object's first line (decorators included)."""
    try:
        lines, start = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise PatchRefused(f"{func.__qualname__}: source not available ({exc})") from exc
    if start != func.__code__.co_firstlineno:
        raise PatchRefused(f"{func.__qualname__}: source does not line up with its code (line {start})")
    return start, start + len(lines)


def future_flags(func: types.FunctionType) -> int:
    """The ``__future__`` compiler flags of ``func``'s module (its imported feature objects)."""
    flags = 0
    for name in __future__.all_feature_names:
        feature = func.__globals__.get(name)
        if isinstance(feature, type(__future__.annotations)):
            flags |= feature.compiler_flag
    return flags


def compile_module(lines: list[str], filename: str, *, flags: int = 0) -> types.CodeType:
    """Compile a whole module text under ``filename`` (``dont_inherit``: torchfix's own future
    imports do not leak into it)."""
    try:
        return compile("".join(lines), filename, "exec", flags=flags, dont_inherit=True)
    except SyntaxError as exc:
        raise PatchRefused(f"{filename}: the module source does not compile ({exc})") from exc


def code_at(module_code: types.CodeType, func: types.FunctionType, line: int) -> types.CodeType:
    """The code object of the function with ``func``'s name and qualified name defined at ``line``
    of ``module_code`` (nested code searched too); exactly one must match."""
    name = func.__code__.co_name
    qualname = getattr(func.__code__, "co_qualname", func.__qualname__)
    found = [
        code
        for code in nested_code(module_code, include_self=False)
        if code.co_name == name and code.co_firstlineno == line and getattr(code, "co_qualname", qualname) == qualname
    ]
    if len(found) != 1:
        raise PatchRefused(f"{func.__qualname__}: found {len(found)} times at line {line} of its module source")
    return found[0]


def require_reproduces(func: types.FunctionType, lines: list[str], *, flags: int = 0, what: str = "") -> int:
    """Compile the unchanged ``lines`` (``func``'s module source) and refuse unless the code found
    for ``func`` there is the running code; returns the function's first line. ``what`` names the
    function in the reason (default: its qualified name)."""
    start, _ = source_span(func)
    unchanged = compile_module(lines, func.__code__.co_filename, flags=flags)
    if not same_code(code_at(unchanged, func, start), func.__code__):
        raise PatchRefused(
            f"{what or func.__qualname__}: its source file does not reproduce the running code "
            "(edited, stale or generated source)"
        )
    return start


@dataclass(frozen=True)
class FunctionSource:
    """A function's module source, checked to reproduce its running code (:func:`reproduced_source`).

    ``lines`` is the whole module's text (never edit it in place: copy it); ``start`` / ``stop`` are
    the function's first and last line numbers in it (1-based); ``flags`` the module's ``__future__``
    compiler flags."""

    func: types.FunctionType
    lines: tuple[str, ...]
    flags: int
    start: int
    stop: int

    def recompile(self, patched: list[str], filename: str, what: str = "") -> types.CodeType:
        """The function's code compiled from ``patched`` (the module's lines, edited) under the pseudo
        ``filename``; PatchRefused when the edit changed its free variables (the running closure would
        no longer fit) or the function is no longer found where it starts."""
        code = code_at(compile_module(patched, filename, flags=self.flags), self.func, self.start)
        if code.co_freevars != self.func.__code__.co_freevars:
            raise PatchRefused(f"{what or self.func.__qualname__}: the patched code has other free variables")
        return code


def reproduced_source(func: types.FunctionType, what: str = "") -> FunctionSource:
    """:func:`module_source`, :func:`future_flags` and :func:`source_span` of ``func``, after
    :func:`require_reproduces`; PatchRefused (naming ``what``) where the source cannot be trusted."""
    lines = module_source(func)
    flags = future_flags(func)
    start = require_reproduces(func, lines, flags=flags, what=what)
    return FunctionSource(func, tuple(lines), flags, start, source_span(func)[1])
