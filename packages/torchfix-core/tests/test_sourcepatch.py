"""Recompiling a function from its module source (torchfix_core.sourcepatch), on modules written here."""

from __future__ import annotations

import importlib.util
import linecache
import sys
import types
from pathlib import Path

import pytest
from torchfix_core import PatchRefused
from torchfix_core import sourcepatch as sp
from torchfix_core.probes import same_code

SOURCE = """from __future__ import annotations
import functools


class Factory:
    def build(self, n: int):
        def inner(x):
            return x + n  # the line a fix edits
        return functools.partial(inner)
"""


def _load(tmp_path: Path, name: str, text: str = SOURCE) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_edit_one_line_and_swap_the_code(tmp_path: Path) -> None:
    module = _load(tmp_path, "torchfix_sourcepatch_demo")
    build = module.Factory.__dict__["build"]
    lines = sp.module_source(build)
    flags = sp.future_flags(build)
    assert flags & __import__("__future__").annotations.compiler_flag
    start = sp.require_reproduces(build, lines, flags=flags)
    assert (start, sp.source_span(build)[1]) == (6, 10)
    edited = [line.replace("x + n", "x * n") for line in lines]
    code = sp.code_at(sp.compile_module(edited, "<edited>", flags=flags), build, start)
    assert not same_code(code, build.__code__)
    original = build.__code__
    build.__code__ = code
    try:
        assert module.Factory().build(3)(5) == 15
    finally:
        build.__code__ = original
    assert module.Factory().build(3)(5) == 8


def test_a_changed_source_file_is_refused(tmp_path: Path) -> None:
    module = _load(tmp_path, "torchfix_sourcepatch_stale")
    build = module.Factory.__dict__["build"]
    path = tmp_path / "torchfix_sourcepatch_stale.py"
    path.write_text(SOURCE.replace("x + n", "x - n"))  # edited after import: not the running program
    linecache.checkcache(str(path))
    with pytest.raises(PatchRefused, match="does not reproduce the running code"):
        sp.require_reproduces(build, sp.module_source(build), flags=sp.future_flags(build))


def test_missing_source_and_bad_edits_are_refused(tmp_path: Path) -> None:
    namespace: dict[str, object] = {}
    exec(compile("def made():\n    return 1\n", "<generated>", "exec"), namespace)
    made = namespace["made"]
    assert isinstance(made, types.FunctionType)
    with pytest.raises(PatchRefused, match="is not available"):
        sp.module_source(made)
    with pytest.raises(PatchRefused, match="does not compile"):
        sp.compile_module(["def broken(:\n"], "<broken>")
    module = _load(tmp_path, "torchfix_sourcepatch_moved")
    build = module.Factory.__dict__["build"]
    with pytest.raises(PatchRefused, match="found 0 times at line 7"):
        sp.code_at(sp.compile_module(sp.module_source(build), "<same>"), build, 7)


def test_reproduced_source_recompiles_an_edit_and_refuses_new_free_variables(tmp_path: Path) -> None:
    module = _load(tmp_path, "torchfix_sourcepatch_helper")
    build = module.Factory.__dict__["build"]
    source = sp.reproduced_source(build)
    assert (source.start, source.stop) == (6, 10) and source.flags == sp.future_flags(build)
    edited = [line.replace("x + n", "x * n") for line in source.lines]
    code = source.recompile(edited, "<edited>")
    assert not same_code(code, build.__code__) and code.co_freevars == build.__code__.co_freevars

    inner = module.Factory().build(3).func  # a closure over n
    closure = sp.reproduced_source(inner)
    assert closure.start == 7
    rebound = [
        line.replace("x + n", "x + n + m").replace("return functools", "m = 1; return functools")
        for line in closure.lines
    ]
    with pytest.raises(PatchRefused, match="inner: the patched code has other free variables"):
        closure.recompile(rebound, "<rebound>")
    with pytest.raises(PatchRefused, match="Factory.build: its source file does not reproduce"):
        (tmp_path / "torchfix_sourcepatch_helper.py").write_text(SOURCE.replace("x + n", "x - n"))
        linecache.checkcache(str(tmp_path / "torchfix_sourcepatch_helper.py"))
        sp.reproduced_source(build, what="Factory.build")
