"""The fix ``aot-hop-body-key``: AOTAutogradCache checks the nodes of nested graph bodies too.

The bug
    ``check_cacheable`` (``torch/_functorch/_aot_autograd/autograd_cache.py``: torch 2.11 line 264,
    2.12 line 270, 2.13 line 283, 2.14.1 line 291, 2.15 line 379) runs ``check_node_safe`` over the
    nodes of the root graph only (plus the two saved-tensors-hook subgraphs). The body of a
    higher-order op (the ``tag_activation_checkpoint`` HOP of ``torch.utils.checkpoint`` inside
    ``torch.compile``, cacheable since torch 2.11; ``invoke_subgraph``; an enabled custom
    ``autograd.Function``) is a nested ``GraphModule`` the root reaches by ``get_attr``: its nodes are
    never checked. The cache key then names a callable in a body by its import path only
    (``_reduce_graph_module_for_cache_key`` pickles the body's code), so an opaque callable
    (``torch._dynamo.allow_in_graph``) whose behaviour depends on a global, or whose body changed,
    keeps its key: a later process loads the artifact compiled for the old behaviour. Wrong results,
    no error. At the root the same callable makes ``check_node_safe`` bypass the cache.

The patch (mirrors the open pytorch/pytorch#194658)
    ``check_cacheable`` is wrapped: after torch's own check, every nested ``GraphModule`` registered
    under the graph (``gm.named_modules()``, the root excluded) has each of its nodes checked with
    the module's live ``check_node_safe``, the same rule the root's nodes meet. A node it refuses
    raises ``BypassAOTAutogradCache`` naming the subgraph; any other exception it raises on a body
    node (a callable without ``__name__``) is turned into the same bypass. ``autograd_cache_key``
    looks ``check_cacheable`` up as a module global on each call, so every caller is covered.

What is bypassed, and why it can only add misses
    Only graphs with a node in a nested body that the root-graph rule would refuse: those now
    bypass the AOTAutograd cache (and fall back to a nonce key under AOT precompile, like an
    unkeyable root). A graph that passed the root check before still passes the same check for its
    root; the added check can only raise. No key changes; no graph that bypassed before is cached. A
    checkpoint body of torch ops passes ``check_node_safe`` (ATen / public torch functions, tensor
    methods) and keeps its cache entry (misses once, then hits).

Probe (live objects, no version check)
    A root graph holding one nested ``GraphModule`` (reached by ``get_attr``) whose body calls a
    plain Python function: torch's ``check_cacheable`` accepts it while it refuses the body alone:
    the bug (``needed``). It refuses the root too: nested bodies are already checked (``not-needed``).
    It refuses the body alone not, or ``check_cacheable`` / ``check_node_safe`` /
    ``BypassAOTAutogradCache`` are not the functions and class expected -> ``PatchRefused``.
    torch 2.10 has the same root-only check, but its ``tag_activation_checkpoint`` is not cacheable
    (the checkpoint graph bypasses at its root): outside ``targets``, so ``out-of-range``.

Hazards
    Graphs with an opaque callable in a checkpoint or custom-autograd body are no longer served
    from the AOTAutograd cache (the FX graph cache of the graph after AOTAutograd still applies).
    Composes with ``aot-bypass-key`` and ``aot-autocast-key`` (other attributes of the same module)
    in any order.

Upstream: pytorch/pytorch#194658 (open).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

#: ``body-bypassed``: a graph whose nested body holds a node the root-graph rule refuses now
#: bypasses the AOTAutograd cache (detail: the subgraph and the node; once per compile, never per step)
ACTED, log = tally_and_log("aot-hop-body-key", "body-bypassed")

MODULE = "torch._functorch._aot_autograd.autograd_cache"
FUNCTION = "check_cacheable"
NODE_CHECK = "check_node_safe"
BYPASS = "BypassAOTAutogradCache"


def _module() -> types.ModuleType:
    return imported_module(MODULE)


def check_nested_bodies(module: types.ModuleType, gm: Any) -> None:
    """Run ``module.check_node_safe`` on every node of every nested ``GraphModule`` of ``gm``.

    Raises ``module.BypassAOTAutogradCache`` (naming the subgraph) on the first node refused."""
    import torch

    bypass = getattr(module, BYPASS)
    check_node_safe = getattr(module, NODE_CHECK)
    for name, sub in gm.named_modules():
        if not name or not isinstance(sub, torch.fx.GraphModule):
            continue
        for node in sub.graph.nodes:
            try:
                check_node_safe(node)
            except bypass as exc:
                ACTED.note("body-bypassed", f"{name}: {node.format_node()}")
                raise bypass(f"{exc}\nSubgraph: {name} (torchfix aot-hop-body-key)") from exc
            except Exception as exc:  # noqa: BLE001 - an unkeyable body node: bypass, never a hit
                ACTED.note("body-bypassed", f"{name}: {node.format_node()}")
                raise bypass(f"Subgraph {name}: node {node.format_node()} cannot be checked: {exc!r}") from exc


def _checked(original: Callable[[Any], None]) -> Callable[[Any], None]:
    module = _module()

    @functools.wraps(original)
    def check_cacheable(gm: Any) -> None:
        original(gm)
        check_nested_bodies(module, gm)

    return check_cacheable


def _not_allowlisted(x: Any) -> Any:
    """A plain Python function: ``check_node_safe`` refuses a node calling it on every release."""
    return x


def nested_graph() -> tuple[Any, Any]:
    """A root ``GraphModule`` ``x -> x`` that holds (``get_attr``) a body ``y -> _not_allowlisted(y)``;
    returns ``(root, body)``."""
    import torch

    body_graph = torch.fx.Graph()
    y = body_graph.placeholder("y")
    body_graph.output(body_graph.call_function(_not_allowlisted, (y,)))
    holder = torch.nn.Module()
    holder.body = torch.fx.GraphModule(torch.nn.Module(), body_graph)
    root_graph = torch.fx.Graph()
    x = root_graph.placeholder("x")
    root_graph.get_attr("body")
    root_graph.output(x)
    return torch.fx.GraphModule(holder, root_graph), holder.body


def refuses(module: types.ModuleType, gm: Any, func: Callable[[Any], None] | None = None) -> bool:
    """Whether ``check_cacheable`` (``func``, default the module's) raises ``BypassAOTAutogradCache`` on ``gm``."""
    func = getattr(module, FUNCTION) if func is None else func
    try:
        func(gm)
    except getattr(module, BYPASS):
        return True
    except Exception as exc:  # noqa: BLE001 - not the layout the fix was written for
        raise PatchRefused(f"{MODULE}.{FUNCTION} raised {exc!r} on a plain graph: unknown layout") from None
    return False


#: what the probe reports where the bug is present
BUG = (
    f"{FUNCTION} checks the root graph only: an opaque callable in a checkpoint or custom-autograd "
    "body is keyed by its import path and a changed global or body is served from the cache"
)


class AotHopBodyKeyFix(Fix):
    """Wraps ``check_cacheable`` to check nested graph bodies too (see the module doc)."""

    def probe(self) -> ProbeResult:
        module = _module()
        self._check_layout(module)
        root, body = nested_graph()
        if not refuses(module, body):
            raise PatchRefused(f"{MODULE}.{FUNCTION} accepts a graph calling a plain Python function: unknown layout")
        if refuses(module, root):
            return ProbeResult(False, f"{FUNCTION} checks the nodes of nested graph bodies already")
        return ProbeResult(True, BUG)

    @staticmethod
    def _check_layout(module: types.ModuleType) -> None:
        from torchfix_core.patching import check_signature

        for name in (FUNCTION, NODE_CHECK):
            func = getattr(module, name, None)
            if not isinstance(func, types.FunctionType):
                raise PatchRefused(f"{MODULE}.{name} is a {type(func).__name__}, expected a function")
            check_signature(func, ("gm",) if name == FUNCTION else ("node",), f"{MODULE}.{name}")
        if not (isinstance(getattr(module, BYPASS, None), type) and issubclass(getattr(module, BYPASS), Exception)):
            raise PatchRefused(f"{MODULE}.{BYPASS} is not an exception class: unknown layout")

    def apply(self) -> None:
        module = _module()
        self._check_layout(module)
        self.patches.wrap(module, FUNCTION, _checked, signature=("gm",))
        log.debug("aot-hop-body-key: %s.%s now checks nested graph bodies", MODULE, FUNCTION)
