"""The fix's source plan on hand-written layouts (no torch needed): the release's final-reduce block is
recognised and recompiled with upstream's branch; any other layout is refused (``PatchRefused``),
never guessed at. The releases' own sources are planned in ``test_codegen.py`` and the contract test.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import types
from pathlib import Path

import pytest
from torchfix_core import PatchRefused
from torchfix_mix_order import patch

#: the shape of 2.11-2.14's ``_codegen_mix_order_reduction`` tail (the loop that writes the lines)
RELEASE = """
class ir:
    class Buffer:
        pass

    class NonOwningLayout:
        pass


def _codegen_mix_order_reduction(self, node1, node2):
    for idx, partial_accum in enumerate(node1):
        buffer_name = partial_accum
        final_reduce = f"{buffer_name} = {ws_name}[{idx}].sum(dim=0)"
        # The workspace tensor is in torch.float
        if (buffer_dtype := V.graph.get_dtype(buffer_name)) != torch.float:
            final_reduce += f".to({buffer_dtype})"
        V.graph.wrapper_code.writeline(final_reduce)
        # mark the buffer as allocated
        V.graph.wrapper_code.allocated.add(buffer_name)
    TAIL
"""


def _load(tmp_path: Path, source: str, name: str) -> types.FunctionType:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    func = module._codegen_mix_order_reduction
    assert isinstance(func, types.FunctionType)
    return func


def test_release_layout_is_planned_with_upstreams_branch(tmp_path: Path) -> None:
    func = _load(tmp_path, RELEASE.replace("TAIL", "return None"), "mix_release")
    found = patch.plan(func)
    inserted = [line.strip() for line in found.lines if "torchfix_buffer" in line or line.strip() == "continue"]
    assert inserted[0] == "torchfix_buffer = V.graph.get_buffer(buffer_name)", inserted
    assert inserted[-1] == "continue", inserted
    assert "NonOwningLayout" in found.code.co_names and found.code.co_freevars == func.__code__.co_freevars
    assert found.filename.startswith("<torchfix mix-order-view-write: ")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("final_reduce = f", "reduced = f"), "occurs 0 times"),
        (
            ("V.graph.wrapper_code.writeline(final_reduce)", "V.graph.wrapper_code.writeline(final_reduce, 1)"),
            "0 times",
        ),
        (("    TAIL", "        V.graph.wrapper_code.writeline('more')\n    TAIL"), "goes on after"),
    ],
)
def test_other_layouts_are_refused(tmp_path: Path, edit: tuple[str, str], reason: str) -> None:
    source = RELEASE.replace(*edit).replace("TAIL", "return None")
    func = _load(tmp_path, source, f"mix_other_{abs(hash(edit))}")
    with pytest.raises(PatchRefused, match=reason):
        patch.plan(func)


def test_a_module_without_ir_classes_is_refused(tmp_path: Path) -> None:
    source = RELEASE.replace("class NonOwningLayout:", "class OtherLayout:").replace("TAIL", "return None")
    func = _load(tmp_path, source, "mix_no_ir")
    with pytest.raises(PatchRefused, match="ir.NonOwningLayout"):
        patch.plan(func)


def test_upstream_code_is_told_apart(tmp_path: Path) -> None:
    func = _load(tmp_path, RELEASE.replace("TAIL", "return ir.NonOwningLayout"), "mix_upstream")
    assert patch.writes_through_views(func)
    assert not patch.writes_through_views(_load(tmp_path, RELEASE.replace("TAIL", "return None"), "mix_plain"))
