"""The fix ``budget-rng``: the memory-budget partitioner saves the forward's random outputs.

The bug (pytorch/pytorch#190758 and #190717, open; upstream PR #190759 open)
    With ``torch._functorch.config.activation_memory_budget < 1`` the min-cut partitioner
    (``torch._functorch.partitioners``) may put a random op of the forward (dropout, ``rand_like``,
    ``randn_like``, inductor's ``inductor_seeds``: every target tagged
    ``torch.Tag.nondeterministic_seeded``) in the backward graph too. The backward copy draws fresh
    randomness, so the backward applies another dropout mask than the forward did: silently wrong
    gradients, no error. Two paths lead there, both in ``choose_saved_values_set``:

    * ``memory_budget == 0`` returns only the graph inputs (``return node_info.inputs``) before
      ``solve_min_cut`` and its "random op" recompute ban ever run: everything is recomputed;
    * ``0 < memory_budget < 1``: the knapsack path can trade the banned random ops back into
      recompute (``get_recomputable_banned_nodes`` has no RNG filter and ``dont_ban`` overrides the
      ban).

    Budget 1 (the default) bans random ops from recompute and is not affected. Nodes of a
    user-annotated activation-checkpoint region (``recompute`` tag ``MUST_RECOMPUTE`` /
    ``PREFER_RECOMPUTE``) are not affected either: ``functionalize_rng_ops`` replays their RNG
    state in the backward.

The patch (mirrors upstream PR #190759: "Save forward RNG outputs when the memory-budget
partitioner forces recompute")
    The module global ``choose_saved_values_set`` (called by name from
    ``min_cut_rematerialization_partition``, its only caller) is wrapped through ``self.patches``.
    When ``memory_budget < 1`` and the joint graph has a forward random op, the wrapper walks the
    joint graph once, from the output back (:func:`rng_outputs_to_save`): a forward node is
    recomputed in the backward when a backward node or another recomputed node uses it and it is
    neither saved nor a placeholder; for every random op found recomputed that way (latest first, so
    that saving a later one can spare an earlier one), its tensor outputs are appended to the saved
    values: the op itself, or for a multi-output op (``native_dropout``) the ``getitem`` nodes the
    backward reads. The backward then reads the forward's draws instead of drawing again. Nothing
    else changes: a graph without a forward random op, budget 1, and random ops the min cut already
    saved get the partitioner's own list back (the same object). Random ops tagged for recompute by
    a user checkpoint region are left to ``functionalize_rng_ops``.

What it costs, and where
    Memory: every random output the backward would otherwise recompute is kept from the forward to
    the backward (for ``native_dropout``: its output and its boolean mask; under inductor: the
    ``inductor_seeds`` tensor, a few bytes). That is the memory the budget wanted to free, and only
    where recomputing would have corrupted the gradients. Compile time: one pass over the joint graph
    per partition with budget < 1 and a random op; no cost per training step.

Probe (live objects, no version check)
    ``choose_saved_values_set`` must have the parameters ``(joint_graph, node_info, memory_budget)``
    and return a ``list`` of nodes, ``NodeInfo`` must have ``required_bw_nodes`` and
    ``is_required_fw``, else :class:`PatchRefused`. Then a tiny joint graph (``native_dropout``,
    ``mul``, ``sin`` and its backward, traced with fake tensors) is partitioned by the live
    ``min_cut_rematerialization_partition`` at budgets 0 and 0.5 (CSE off, so the probe imports no
    pattern matcher): a random op used in the backward graph is the bug (``applied``); none at both
    budgets is ``not-needed``. After applying, the same partition must come out without a random
    op in the backward, else the fix refuses and rolls back.

Hazards
    The AOTAutograd and FX graph cache keys do not cover the partitioner's code: an artifact compiled
    without the fix (before torchfix was installed, or with it disabled) is loaded as it is, with its
    recomputed random ops. Clear ``TORCHINDUCTOR_CACHE_DIR`` once after installing. A random op with several outputs whose backward use is not through ``getitem`` cannot be
    saved; it is left recomputed and logged once. Random ops computed only for the backward (no
    forward use) are outside the fix. ``_sync_decision_cross_ranks`` (opt-in) runs after the wrapper
    and sees the augmented list on every rank alike.

Upstream: pytorch/pytorch#190758, #190717 (issues), #190759 (this fix's shape), #191684 (an
alternative: replay the RNG state instead of saving the outputs).
"""

from __future__ import annotations

import inspect
import operator
import threading
import types
from typing import Any, Callable, Iterable

import torch
from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

#: What ``torchfix_core.report()`` counts for this fix: ``saved-random-outputs``, once per partition
#: whose saved values the wrapper extended (detail: the budget and the random ops), in
#: :meth:`SavedRng.record`. Not counted: partitions it returned unchanged, random outputs it could
#: not save, and the self-check partition of :meth:`BudgetRngFix.apply`.
ACTED, log = tally_and_log("budget-rng", "saved-random-outputs")

MODULE = "torch._functorch.partitioners"
FUNCTION = "choose_saved_values_set"
#: Parameters of ``choose_saved_values_set`` the fix was written for (torch 2.8.0-2.15.0).
SIGNATURE = ("joint_graph", "node_info", "memory_budget")
#: Budgets the probe partitions at: the early return (0) and the knapsack path (0.5).
PROBE_BUDGETS = (0.0, 0.5)


def _partitioners() -> types.ModuleType:
    return imported_module(MODULE)


def is_rng_node(node: Any) -> bool:
    """A ``call_function`` node whose target is tagged ``torch.Tag.nondeterministic_seeded`` (the
    test ``functionalize_rng_ops`` uses)."""
    return node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


def _tensor_valued(node: Any) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)


class Unsaveable(Exception):
    """A recomputed random op whose outputs cannot be saved as tensors."""


def rng_outputs_to_save(
    nodes: Iterable[Any],
    node_info: Any,
    saved: Iterable[Any],
    must_recompute: Callable[[Any], bool],
    on_unsaveable: Callable[[Any], None] = lambda node: None,
) -> list[Any]:
    """The outputs of the forward random ops the backward would recompute, given ``saved``.

    One pass over the joint graph's ``nodes`` in reverse order. A node is *recomputed* when it is
    not saved, not a placeholder, not a backward node, and a backward node or a recomputed node
    uses it. A forward random op (``node_info.is_required_fw``, not tagged for recompute by a user
    checkpoint region) found recomputed has its tensor outputs added to the result and counts as
    saved from then on (its ancestors no longer need it). Returns them in forward order."""
    stops = set(saved)
    backward = node_info.required_bw_nodes
    recomputed: set[Any] = set()
    extra: list[Any] = []
    for node in reversed(list(nodes)):
        if node in stops or node.op == "placeholder" or node in backward:
            continue
        if not any(user in recomputed or (user in backward and user.op != "output") for user in node.users):
            continue
        if is_rng_node(node) and node_info.is_required_fw(node) and not must_recompute(node):
            if _tensor_valued(node):
                outputs = [node]
            else:
                used = [u for u in node.users if u in recomputed or u in backward]
                if not all(u.target is operator.getitem and _tensor_valued(u) for u in used):
                    on_unsaveable(node)
                    recomputed.add(node)
                    continue
                outputs = used
            extra.extend(outputs)
            for out in outputs:
                recomputed.discard(out)
                stops.add(out)
            continue
        recomputed.add(node)
    extra.reverse()
    return extra


def _random_op_name(node: Any) -> str:
    """The random op behind a saved output (the op of a ``getitem`` of a multi-output op)."""
    if getattr(node, "target", None) is operator.getitem and node.args:
        node = node.args[0]
    return str(getattr(node, "target", node))


class SavedRng:
    """What the wrapper did in this process (for ``status()``): partitions changed, outputs saved."""

    __slots__ = ("_lock", "checking", "outputs", "partitions", "unsaveable")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.partitions = 0
        self.outputs = 0
        self.unsaveable: set[str] = set()
        self.checking = False  # True during apply()'s self-check: not the program's partition

    def record(self, extra: list[Any], budget: float) -> None:
        if self.checking:
            return
        count = len(extra)
        ops = sorted({_random_op_name(node) for node in extra})
        ACTED.note("saved-random-outputs", f"budget {budget}: {count} output(s) of {', '.join(ops)}")
        with self._lock:
            self.partitions += 1
            self.outputs += count
            first = self.partitions == 1
        (log.info if first else log.debug)(
            "torchfix budget-rng: memory budget %s would recompute %d random output(s) in the backward; "
            "saved from the forward instead (pytorch#190758)",
            budget,
            count,
        )

    def reset(self) -> None:
        with self._lock:
            self.partitions = 0
            self.outputs = 0
            self.unsaveable.clear()

    def refuse(self, node: Any) -> None:
        name = str(getattr(node, "target", node))
        with self._lock:
            if name in self.unsaveable:
                return
            self.unsaveable.add(name)
        log.warning(
            "torchfix budget-rng: random op %s is recomputed in the backward but its outputs are not "
            "plain getitem tensors; left as the partitioner chose (fresh randomness in the backward)",
            name,
        )

    def note(self) -> str:
        if not self.partitions:
            return "no partition with a memory budget < 1 recomputed a random op yet"
        return f"{self.outputs} random output(s) saved in {self.partitions} partition(s)"


def make_wrapper(original: Callable[..., Any], must_recompute: Callable[[Any], bool], seen: SavedRng) -> Any:
    """``choose_saved_values_set`` that appends :func:`rng_outputs_to_save` when ``memory_budget < 1``."""

    def choose_saved_values_set(joint_graph: Any, node_info: Any, memory_budget: float = 1) -> Any:
        saved = original(joint_graph, node_info, memory_budget=memory_budget)
        if memory_budget >= 1 or not isinstance(saved, list):
            return saved
        if not any(is_rng_node(n) for n in joint_graph.nodes):
            return saved
        extra = rng_outputs_to_save(joint_graph.nodes, node_info, saved, must_recompute, seen.refuse)
        if not extra:
            return saved
        seen.record(extra, memory_budget)
        return [*saved, *extra]

    return choose_saved_values_set


def _probe_joint(primals_1: Any, tangents_1: Any) -> list[Any]:
    """The probe's joint graph: ``sin(dropout(x) * 2)`` and its gradient, in the ATen ops AOTAutograd
    traces ``F.dropout`` to."""
    aten = torch.ops.aten
    out, mask = aten.native_dropout.default(primals_1, 0.5, True)
    mul = aten.mul.Tensor(out, 2.0)
    grad = aten.mul.Tensor(aten.mul.Tensor(tangents_1, aten.cos.default(mul)), 2.0)
    return [aten.sin.default(mul), aten.native_dropout_backward.default(grad, mask, 2.0)]


def rng_in_backward(budget: float) -> list[str]:
    """Partition the probe's joint graph with the live partitioner at ``budget``; the names of the
    random ops the backward graph computes and uses."""
    import torch._functorch.config as functorch_config
    from torch.fx.experimental.proxy_tensor import make_fx

    partitioners = _partitioners()
    joint = make_fx(_probe_joint, tracing_mode="fake")(torch.zeros(64), torch.zeros(64))
    with functorch_config.patch(activation_memory_budget=budget, cse=False):
        _, bw = partitioners.min_cut_rematerialization_partition(joint, None, num_fwd_outputs=1)
    return [n.name for n in bw.graph.nodes if is_rng_node(n) and n.users]


def _check_layout(partitioners: types.ModuleType) -> Any:
    func = getattr(partitioners, FUNCTION, None)
    if not isinstance(func, types.FunctionType):
        raise PatchRefused(f"{MODULE}.{FUNCTION} is a {type(func).__name__}, expected a function")
    found = tuple(inspect.signature(func).parameters)
    if found != SIGNATURE:
        raise PatchRefused(f"{MODULE}.{FUNCTION} has parameters {found}, expected {SIGNATURE}")
    returns = str(func.__annotations__.get("return", "")).replace("torch.fx.node.Node", "fx.Node")
    if returns != "list[fx.Node]":
        raise PatchRefused(f"{MODULE}.{FUNCTION} returns {returns!r}, expected list[fx.Node]")
    node_info = getattr(partitioners, "NodeInfo", None)
    missing = [a for a in ("required_bw_nodes", "is_required_fw") if not _has_member(node_info, a)]
    if missing:
        raise PatchRefused(f"{MODULE}.NodeInfo has no {missing}: unknown layout")
    must_recompute = getattr(partitioners, "must_recompute", None)
    if not callable(must_recompute):
        raise PatchRefused(f"{MODULE}.must_recompute does not exist: cannot tell user checkpoint regions apart")
    if not callable(getattr(partitioners, "min_cut_rematerialization_partition", None)):
        raise PatchRefused(f"{MODULE}.min_cut_rematerialization_partition does not exist")
    return must_recompute


def _has_member(cls: Any, name: str) -> bool:
    fields = getattr(cls, "__dataclass_fields__", {})
    return name in fields or hasattr(cls, name)


class BudgetRngFix(Fix):
    """Wraps ``torch._functorch.partitioners.choose_saved_values_set`` (see the module doc)."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self.seen: SavedRng | None = None

    def _probe_budgets(self) -> dict[float, list[str]]:
        try:
            return {budget: rng_in_backward(budget) for budget in PROBE_BUDGETS}
        except PatchRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - the partitioner does not take our joint graph
            raise PatchRefused(f"partitioning the probe's joint graph failed: {exc!r}") from None

    def probe(self) -> ProbeResult:
        _check_layout(_partitioners())
        found = self._probe_budgets()
        bad = {b: names for b, names in found.items() if names}
        if not bad:
            return ProbeResult(
                False,
                "the min-cut partitioner keeps random ops out of the backward at memory budgets "
                f"{', '.join(map(str, PROBE_BUDGETS))}: nothing recomputes fresh randomness",
            )
        where = "; ".join(f"budget {b}: {', '.join(names)}" for b, names in bad.items())
        return ProbeResult(
            True,
            f"activation_memory_budget < 1 recomputes forward random ops in the backward with fresh "
            f"randomness ({where}): gradients use another dropout mask than the forward",
        )

    def apply(self) -> None:
        partitioners = _partitioners()
        must_recompute = _check_layout(partitioners)
        seen = SavedRng()
        self.patches.wrap(
            partitioners,
            FUNCTION,
            lambda original: make_wrapper(original, must_recompute, seen),
            signature=SIGNATURE,
        )
        seen.checking = True
        try:
            left = {b: names for b, names in self._probe_budgets().items() if names}
        finally:
            seen.checking = False
        if left:
            raise PatchRefused(f"the probe's partition still recomputes random ops with the fix: {left}")
        seen.reset()  # belt and braces: nothing of the self-check above is the program's
        self.seen = seen
        log.debug("budget-rng: %s.%s saves forward random outputs when memory_budget < 1", MODULE, FUNCTION)

    def runtime_note(self) -> str:
        return self.seen.note() if self.seen is not None else ""
