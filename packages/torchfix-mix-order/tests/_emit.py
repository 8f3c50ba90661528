"""Drive the release's ``SIMDScheduling._codegen_mix_order_reduction`` on a CPU (a test harness).

The function's last step, the one the bug is in, writes one wrapper line per column reduction
(``bufN = ws[a : b].view(nsplit, rnumel).sum(dim=0)...``). Everything before it builds and
benchmarks a Triton kernel, which needs a GPU. :func:`emitted_lines` calls the live function (the
release's code, or the fix's recompiled code) with a stand-in ``self`` (the kernel-building
methods return a stand-in kernel whose ``saved_partial_accumulate`` names the buffers) and a
stand-in graph and wrapper that record the lines written; the buffers are real ``ir.Buffer``
objects with a real ``ir.FixedLayout`` or ``ir.NonOwningLayout``, and the Inductor config fixes the
split size (no device query, no autotuning). Stand-ins accept both call shapes: 2.10-2.14
(``_generate_kernel_code_for_mix_order_reduction(features, split_size=..., for_benchmark=...)`` ->
``(kernel, ws, src)``) and 2.15 (``_create_kernel_for_mix_order_reduction`` then
``(kernel, for_benchmark=...)`` -> ``(ws, src)``).

:func:`run_lines` then runs the emitted lines on real tensors: the view buffer is a slice of a
larger tensor filled with NaN (what the viewed buffer holds when nothing writes it), and the check
is whether that slice holds the reduction afterwards.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

#: the stand-in reduction: ``NUMEL`` rows reduced over in ``SPLIT``-row splits, ``RNUMEL`` columns
NUMEL, RNUMEL, SPLIT = 64, 8, 16
NSPLIT = (NUMEL + SPLIT - 1) // SPLIT
WS = "ws_0"
#: the buffers of the two column reductions: a view into ``buf_big`` (offset ``RNUMEL``), and a plain one
VIEW, PLAIN, BIG = "buf3", "buf5", "buf_big"


class _Wrapper:
    """Records what the function writes; ``codegen_allocation`` of a view writes its alias line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.allocated: set[str] = set()

    def writeline(self, line: object) -> None:
        self.lines.append(str(line))

    def make_comment(self, line: str) -> None:
        self.lines.append(line)

    def codegen_python_sizevar(self, expr: object) -> str:
        return str(expr)

    def codegen_allocation(self, buffer: Any) -> None:
        name = buffer.get_name()
        if name in self.allocated:
            return
        self.allocated.add(name)
        self.lines.append(f"{name} = {BIG}[{RNUMEL} : {2 * RNUMEL}]  # alias")


def _buffers(dtype: Any) -> dict[str, Any]:
    import torch
    from torch._inductor import ir

    device = torch.device("cuda")

    class _View:
        """What a ``NonOwningLayout`` reads its device, dtype, size and stride from."""

        def get_layout(self) -> Any:
            return ir.FixedLayout(device, dtype, [RNUMEL], [1])

    return {
        VIEW: ir.Buffer(name=VIEW, layout=ir.NonOwningLayout(_View())),  # type: ignore[arg-type]
        PLAIN: ir.Buffer(name=PLAIN, layout=ir.FixedLayout(device, dtype, [RNUMEL], [1])),
    }


@contextlib.contextmanager
def _stand_ins(dtype: Any) -> Iterator[tuple[Any, _Wrapper]]:
    import sympy
    import torch._inductor.config as inductor_config
    from torch._inductor import scheduler
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V

    buffers = _buffers(dtype)
    wrapper = _Wrapper()
    graph = types.SimpleNamespace(
        wrapper_code=wrapper,
        sizevars=SizeVarAllocator(),
        removed_buffers=set(),
        inplaced_to_remove=set(),
        get_buffer=buffers.get,
        get_dtype=lambda name: buffers[name].get_dtype(),
    )
    kernel = types.SimpleNamespace(
        saved_partial_accumulate=[
            types.SimpleNamespace(buffer_name=name, reduction_type="sum") for name in (VIEW, PLAIN)
        ],
        removed_buffers=set(),
        inplaced_to_remove=set(),
        rsplit_size=SPLIT,
        fixed_config=None,
        call_kernel=lambda name, deallocate_ws=True: wrapper.writeline(f"{name}.run(...)"),
        deallocate_workspaces=lambda: wrapper.writeline(f"del {WS}"),
    )

    def generate(first: Any, split_size: Any = None, for_benchmark: bool = False) -> tuple[Any, ...]:
        return (WS, "src") if first is kernel else (kernel, WS, "src")

    subnode = types.SimpleNamespace(
        node=types.SimpleNamespace(_split_size=None),
        cancel_reduction_split=lambda: None,
        extract_pw_from_reduction=lambda: types.SimpleNamespace(swap_pw_red_dimension=lambda: None),
    )
    scheduling = types.SimpleNamespace(
        _split_mix_order_reduction_epilogue=lambda node2: ([subnode, subnode], []),
        generate_node_schedule=lambda nodes, numel, rnumel: [],
        _create_kernel_for_mix_order_reduction=lambda features, split_size: kernel,
        _generate_kernel_code_for_mix_order_reduction=generate,
        define_kernel=lambda src, schedule, k: "triton_red_fused_0",
        codegen_comment=lambda schedule, name: None,
        free_buffers_in_scheduler=lambda: None,
        scheduler=None,
    )
    owner = scheduler.MixOrderReduction
    saved = vars(owner)["get_numel_rnumel"]
    owner.get_numel_rnumel = classmethod(lambda cls, node: (sympy.Integer(NUMEL), sympy.Integer(RNUMEL)))  # type: ignore[assignment]
    try:
        with inductor_config.patch({"triton.mix_order_reduction_split_size": SPLIT}), V.set_graph_handler(graph):  # type: ignore[arg-type]
            yield scheduling, wrapper
    finally:
        owner.get_numel_rnumel = saved  # type: ignore[method-assign]


def emitted_lines(dtype_name: str = "float32") -> list[str]:
    """The wrapper lines the live ``_codegen_mix_order_reduction`` writes for the two stand-in
    reductions (the view ``buf3``, the plain ``buf5``) of dtype ``dtype_name``."""
    import torch
    from torch._inductor.codegen.simd import SIMDScheduling

    node1 = types.SimpleNamespace(get_nodes=lambda: [], get_device=lambda: torch.device("cuda"))
    with _stand_ins(getattr(torch, dtype_name)) as (scheduling, wrapper):
        SIMDScheduling._codegen_mix_order_reduction(scheduling, node1, object())
    return wrapper.lines


def run_lines(lines: list[str], dtype_name: str = "float32") -> dict[str, Any]:
    """Run the emitted lines from the workspace on (the kernel call and comments skipped) on real
    tensors: the workspace random, ``buf_big`` (four columns of ``RNUMEL``) NaN, ``buf3`` its second
    column unless an alias line makes it. Returns whether ``buf_big``'s second column holds the view's
    reduction (``view_written``), its non-finite count, and whether ``buf5`` holds its reduction."""
    import torch

    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    ws = torch.randn(2 * NSPLIT * RNUMEL)
    big = torch.full((4 * RNUMEL,), float("nan"), dtype=dtype)
    scope: dict[str, Any] = {"torch": torch, WS: ws, BIG: big}
    scope[VIEW] = big[RNUMEL : 2 * RNUMEL]
    for line in lines:
        if line.startswith(f"{VIEW}") or line.startswith(f"{PLAIN}"):
            exec(line, scope)  # noqa: S102 - the wrapper lines the release (or the fix) generated
    expected = ws.view(2, NSPLIT, RNUMEL).sum(dim=1).to(dtype)
    region = big[RNUMEL : 2 * RNUMEL]
    plain = scope.get(PLAIN)
    return {
        "view_written": bool(torch.equal(region, expected[0])),
        "view_nonfinite": int((~torch.isfinite(region.float())).sum()),
        "plain_written": plain is not None and bool(torch.equal(plain, expected[1])),
        "plain_dtype": None if plain is None else str(plain.dtype),
    }
