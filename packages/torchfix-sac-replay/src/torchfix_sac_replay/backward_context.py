"""Run every compiled backward in its own copy of the backward's contextvars context (pytorch#185372).

Mechanism (torch 2.12-2.13): ``torch.autograd.graph._engine_run_backward`` stores one
``contextvars.copy_context()`` in ATen's thread-local state under the key ``"context"``; the autograd
engine hands that state, i.e. the *same* ``Context`` object, to every thread that runs a node of the
backward (the calling thread for CPU nodes, one worker thread per accelerator). AOTAutograd's
compiled backward runs its body with ``functools.partial(_cc.run, impl_fn)``. A ``Context`` can be
entered once at a time, so when two compiled backwards of one ``backward()`` run at the same time
(a CPU region and a CUDA region, or regions on two GPUs), the second raises ``RuntimeError: cannot
enter context: <_contextvars.Context object at ...> is already entered``. Whether they overlap
depends on timing, so the failure is intermittent (pytorch#185372).

The fix is upstream's (PR #186659, in torch 2.14): the compiled backward runs in ``_cc.copy()``,
a fresh copy per call with the same ContextVar values. Patch points, both through
``PatchSet.swap_code`` (the function object stays; its code changes):

* torch 2.13: ``runtime_wrappers._codegen_compiled_backward`` generates the wrapper's source; its
  code gets one string constant changed, ``"        impl_fn = functools.partial(_cc.run, impl_fn)"``
  becoming ``"...(_cc.copy().run, impl_fn)"``, which is upstream's one-line change, after a line
  counting it; the ``def _compiled_backward(`` line gets the counts' binding before it. Wrappers are
  generated when a compiled graph's autograd function is built (at compile time and when a cached
  graph is loaded), so every graph built after the patch gets the copying wrapper.
* torch 2.12: the same line is written inline in ``CompiledFunction.backward``, which
  ``_AOTDispatchAutogradFunctionFactory.build`` defines. The module's source is compiled again,
  unchanged, and ``build``'s code from it must reproduce the live bytecode exactly; then ``functools.partial(config_ctx.run, impl_fn)`` (matched once) becomes
  ``functools.partial(config_ctx.copy().run, impl_fn)`` (after the counting statement, on the same
  line; ``build``'s first statement's line gets the binding of the counts in front, so no line
  number moves) and the result replaces ``build``'s code.
  Its filename is ``<torchfix backward-context: ...>``, registered with ``linecache``.

torch 2.14+ carries the change (the probe sees ``_cc.copy().run`` in the generator) and torch <= 2.11
hands no context to backward at all (``_engine_run_backward`` stores nothing): both are "not needed".

Report (``torchfix_core.report()``, :data:`ACTED`): ``copied-context`` counts each compiled
backward that ran in a copy of the backward's context. The patched code counts it itself, one dict
increment next to the copy: the generated wrapper's module (2.13) and ``build``'s scope (2.12) bind
:data:`COUNTS` once, when a wrapper is generated or a graph's autograd function is built (an
``__import__`` of this already imported module), as ``_torchfix_counts_``.

Cost: one ``Context.copy()`` per compiled-backward call (a persistent-map copy, O(1); upstream measured
about 14 ns) and the increment; nothing runs at forward time.

Hazards:

* Graphs whose autograd function was built before the patch keep the old wrapper (the fix is applied
  when ``torch._dynamo`` is imported, before anything can be compiled, unless activation was turned
  off and ``torchfix_core.apply()`` is called after compiling).
* As upstream: a ContextVar set inside a compiled backward is no longer visible to another compiled
  backward of the same ``backward()`` call (each call has its own copy); values set before
  ``backward()`` are seen as before.
"""

from __future__ import annotations

import ast
import importlib
import linecache
import sys
import textwrap
import types
from dataclasses import dataclass

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import nested_code
from torchfix_core.sourcepatch import reproduced_source
from torchfix_core.tallies import counts_expression, tally_and_log

FIX_ID = "backward-context"
#: What the fix did in this process (``torchfix_core.report()``); declared at 0 on import.
ACTED, log = tally_and_log(FIX_ID, "copied-context")
COUNTS = ACTED.counts
#: the statement that binds :data:`COUNTS` where the patched code runs (once per wrapper / build)
BIND_COUNTS = f"_torchfix_counts_ = {counts_expression(__name__)}"
COUNT = "_torchfix_counts_['copied-context'] += 1"
RUNTIME_WRAPPERS = "torch._functorch._aot_autograd.runtime_wrappers"
FILENAME_PREFIX = f"<torchfix {FIX_ID}: "

#: torch 2.13 ``_codegen_compiled_backward`` (runtime_wrappers.py:3250): the generated line, and upstream's
#: (the patch writes it after a line counting it, :data:`COUNT`).
GENERATED_OLD = "        impl_fn = functools.partial(_cc.run, impl_fn)"
GENERATED_NEW = "        impl_fn = functools.partial(_cc.copy().run, impl_fn)"
#: the generated source's first line (runtime_wrappers.py:3209): :data:`BIND_COUNTS` goes before it
GENERATED_DEF = "def _compiled_backward("
#: the marker of upstream's change in the generator (torch 2.14.1 :3318, 2.15.0 :3338)
UPSTREAM_MARKER = "_cc.copy().run"
#: torch 2.12 ``CompiledFunction.backward`` (runtime_wrappers.py:2880), the same line written inline.
INLINE_OLD = "impl_fn = functools.partial(config_ctx.run, impl_fn)"
INLINE_NEW = "impl_fn = functools.partial(config_ctx.copy().run, impl_fn)"


@dataclass(frozen=True)
class Plan:
    """What to patch on the running torch: the function, its new code, and (for a recompiled
    source) the filename and lines to register with ``linecache``."""

    layout: str
    func: types.FunctionType
    original: types.CodeType
    code: types.CodeType
    filename: str | None = None
    lines: tuple[str, ...] = ()


def _runtime_wrappers() -> types.ModuleType:
    # Already loaded when the trigger (torch._dynamo) fires; importing it first on its own would hit
    # torch's import cycle (runtime_wrappers -> torch._dynamo -> compiled_autograd -> runtime_wrappers).
    module = sys.modules.get(RUNTIME_WRAPPERS)
    if module is None:
        import torch._dynamo  # noqa: F401

        module = importlib.import_module(RUNTIME_WRAPPERS)
    return module


def backward_stashes_context() -> bool:
    """True when ``torch.autograd.graph._engine_run_backward`` stores a ``Context`` in ATen's TLS
    (torch 2.12+); torch <= 2.11 hands no context to backward, so no compiled backward enters one."""
    import torch.autograd.graph as graph

    func = getattr(graph, "_engine_run_backward", None)
    code = getattr(func, "__code__", None)
    if not isinstance(code, types.CodeType):
        raise PatchRefused("torch.autograd.graph._engine_run_backward is not a Python function (unknown layout)")
    return "_stash_obj_in_tls" in code.co_names


def _strings(code: types.CodeType) -> list[str]:
    return [c for c in code.co_consts if isinstance(c, str)]


def _generator_plan(gen: types.FunctionType) -> Plan | None:
    """torch 2.13: the generator with the unfixed line, or None when upstream's line is there."""
    code = gen.__code__
    strings = _strings(code)
    if any(UPSTREAM_MARKER in s for s in strings):
        return None
    if strings.count(GENERATED_OLD) != 1:
        raise PatchRefused(
            f"{RUNTIME_WRAPPERS}._codegen_compiled_backward generates neither {GENERATED_OLD.strip()!r} "
            f"nor upstream's {UPSTREAM_MARKER!r}: unknown layout"
        )
    if sum(s.startswith(GENERATED_DEF) for s in strings) != 1:
        raise PatchRefused(
            f"{RUNTIME_WRAPPERS}._codegen_compiled_backward: no single {GENERATED_DEF!r} line: unknown layout"
        )
    new = {GENERATED_OLD: f"        {COUNT}\n{GENERATED_NEW}"}

    def patched(c: object) -> object:
        if not isinstance(c, str):
            return c
        if c.startswith(GENERATED_DEF):
            # torch execs the source with a separate locals dict: bind it as a global of the wrapper
            return f"global _torchfix_counts_\n{BIND_COUNTS}\n{c}"
        return new.get(c, c)

    return Plan("generator", gen, code, code.replace(co_consts=tuple(patched(c) for c in code.co_consts)))


def _first_body_line(lines: list[str], start: int, stop: int) -> int:
    """0-based index in ``lines`` of the line where the first statement of the function defined at
    ``start`` (1-based; its span ends before ``stop``) begins; that statement must start its line."""
    text = textwrap.dedent("".join(lines[start - 1 : stop - 1]))
    tree = ast.parse(text)
    func = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(func, ast.FunctionDef) or not func.body:
        raise PatchRefused("_AOTDispatchAutogradFunctionFactory.build's source is not one def: unknown layout")
    first = func.body[0]
    line = text.splitlines()[first.lineno - 1]
    if first.lineno == func.lineno or line[: first.col_offset].strip():
        raise PatchRefused("_AOTDispatchAutogradFunctionFactory.build: its first statement does not start a line")
    return start - 1 + first.lineno - 1


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _inline_plan(rw: types.ModuleType) -> Plan | None:
    """torch 2.12: ``build`` with the unfixed inline line, or None when its backward already copies
    (the module recompiled whole, its unchanged source checked first: :mod:`torchfix_core.sourcepatch`)."""
    cls = getattr(rw, "_AOTDispatchAutogradFunctionFactory", None)
    build = cls.__dict__.get("build") if isinstance(cls, type) else None
    if not isinstance(cls, type) or not isinstance(build, types.FunctionType):
        raise PatchRefused(
            f"{RUNTIME_WRAPPERS} has no _codegen_compiled_backward nor a factory build(): unknown layout"
        )
    original = build.__code__
    backward = [
        c
        for c in nested_code(original, include_self=False)
        if c.co_name == "backward" and "_get_obj_in_tls" in c.co_names
    ]
    if len(backward) != 1:
        raise PatchRefused("CompiledFunction.backward does not read the backward context: unknown layout")
    if "copy" in backward[0].co_names:
        return None
    source = reproduced_source(build, what="_AOTDispatchAutogradFunctionFactory.build")
    module_lines, start, stop = list(source.lines), source.start, source.stop
    at = [i for i in range(start - 1, stop) if module_lines[i].strip() == INLINE_OLD]
    if len(at) != 1:
        raise PatchRefused(
            f"_AOTDispatchAutogradFunctionFactory.build: {INLINE_OLD!r} occurs {len(at)} times, expected once"
        )
    i = at[0]
    patched = list(module_lines)
    patched[i] = _indent(module_lines[i]) + f"{COUNT}; {INLINE_NEW}\n"
    b = _first_body_line(module_lines, start, stop)
    patched[b] = _indent(module_lines[b]) + f"{BIND_COUNTS}; {module_lines[b].lstrip()}"
    filename = f"{FILENAME_PREFIX}{original.co_filename}>"
    code = source.recompile(patched, filename, what="_AOTDispatchAutogradFunctionFactory.build")
    return Plan("inline", build, original, code, filename, tuple(patched))


def plan() -> Plan | None:
    """The patch for the running torch, None where the bug is absent; raises PatchRefused on an
    unknown layout. Side-effect free."""
    if not backward_stashes_context():
        return None
    rw = _runtime_wrappers()
    gen = rw.__dict__.get("_codegen_compiled_backward")
    if gen is not None:
        if not isinstance(gen, types.FunctionType):
            raise PatchRefused(f"{RUNTIME_WRAPPERS}._codegen_compiled_backward is not a Python function")
        return _generator_plan(gen)
    return _inline_plan(rw)


class BackwardContextFix(Fix):
    """Compiled backward runs in ``_cc.copy()``, not the shared ``_cc`` (pytorch PR #186659)."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self._plan: Plan | None = None  # the probe's, reused by apply() while the code is unchanged

    def probe(self) -> ProbeResult:
        if not backward_stashes_context():
            return ProbeResult(
                False,
                "autograd hands no contextvars.Context to backward on this torch (no 'context' in ATen TLS): "
                "compiled backward enters none",
            )
        found = self._plan = plan()
        if found is None:
            return ProbeResult(
                False,
                "compiled backward already runs in a copy of the backward context (upstream PR #186659, "
                "or this fix applied by another copy)",
            )
        where = "the generated wrapper" if found.layout == "generator" else "CompiledFunction.backward"
        return ProbeResult(
            True,
            f"{where} enters the one backward Context shared by all autograd threads: two compiled "
            "backwards running at once fail with 'cannot enter context ... is already entered'",
        )

    def apply(self) -> None:
        found = self._plan
        if found is None or found.func.__code__ is not found.original:
            found = plan()
        if found is None:
            raise PatchRefused("nothing to patch (the probe should have said not-needed)")
        if found.filename is not None:
            text = "".join(found.lines)
            linecache.cache[found.filename] = (len(text), None, list(found.lines), found.filename)
        self.patches.swap_code(found.func, found.code)
        log.debug("patched %s (%s layout)", found.func.__qualname__, found.layout)
