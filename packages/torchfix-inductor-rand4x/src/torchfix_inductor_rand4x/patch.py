"""inductor-rand4x-dropout: Inductor's 4x random path off unless opted in (torch 2.15's choice), keyed.

Background (pytorch issue #198333, open, "correctness (silent)")
    From torch 2.13, ``TritonOverrides.rand`` / ``randn`` (``torch/_inductor/codegen/triton.py``)
    emit ``triton_helpers.rand4x(seed, offset, BLOCK)`` / ``randn4x`` whenever
    ``TritonOverrides._can_use_4x_random()`` is true: a Triton kernel (not a template) on a CUDA
    device whose tensors are 1-D (``V.kernel.triton_tensor_ndim() == 1``), with
    ``config.align_random_eager`` off. ``rand4x`` (``runtime/triton_helpers.py``) draws four values
    per Philox call from ``base = tl.min(offsets)`` and ``base // 4 + tl.arange(0, BLOCK // 4)``,
    which is right only for contiguous, 4-aligned offsets. Two symptoms follow:

    * when the kernel's offsets stride (dropout of ``x.transpose(1, 2).contiguous()``: the 1-D
      kernel walks the input's order, so the output offsets of one block stride by the channel
      count), blocks whose index differs only in its low two bits share ``base // 4`` and get the
      same Philox output: the mask repeats in groups of four, a quarter of it independent;
    * whether a kernel is 1-D is a property of the generated kernel, not of the graph: under
      activation checkpointing the forward's dropout kernel is 1-D (``rand4x``) while the recompute,
      fused into the backward, is a 2-D tiled kernel (``tl.rand``), so the backward differentiates
      another mask than the forward applied. Silently wrong gradients.

    torch 2.15.0 turns the path off by default: ``config.use_rand4x =
    os.environ.get("TORCHINDUCTOR_USE_RAND4X") == "1"`` (``_inductor/config.py`` :1002-1004,
    "Disabled pending #198333"), read in ``_can_use_4x_random`` (``codegen/triton.py`` :2192-2201).
    torch 2.12 and older have no 4x path (``rand`` emits ``tl.rand``).

The fix (2.15.0's choice, backported)
    * ``TritonOverrides._can_use_4x_random`` (a static method, the one gate of both ``rand`` and
      ``randn``, which call it through the class) is wrapped to answer False unless the user opted
      in with upstream's own switch, ``TORCHINDUCTOR_USE_RAND4X=1`` (read at each call, so the
      codegen and the key term below always agree); opted in, the original decides, as on 2.15.
      Every kernel then draws with ``tl.rand`` / ``tl.randn``, one Philox call per element: what
      torch 2.12 and 2.15 do. No torchfix switch of its own: upstream's variable is the opt-in a
      user keeps after upgrading to 2.15, and ``TORCHFIX_DISABLE`` / ``TORCHFIX_<ID>_ENABLED=0``
      already restore 2.13/2.14's codegen entirely.
    * The fix's effect is ``compiled`` (its spec), so torchfix-core keys the FX graph and
      AOTAutograd caches on it while it is applied (one term per compiled-effect fix on the object
      both keys hash). Its detail (:meth:`Rand4xOffFix.cache_key_detail`) is the random codegen in
      effect, ``rand4x off`` or ``rand4x opted in (TORCHINDUCTOR_USE_RAND4X=1)``: 2.13 and 2.14 hash
      no such setting (2.15 hashes ``config.use_rand4x`` with the rest of its config), so without
      the term a process with the fix would load the ``rand4x`` kernels a process without it cached.

Probe (live objects, no version check)
    ``TritonOverrides`` without ``_can_use_4x_random`` whose ``rand`` / ``randn`` emit no 4x helper
    (2.12): ``not-needed``. ``torch._inductor.config`` with ``use_rand4x`` (2.15): ``not-needed``,
    upstream's gate is in place. A torch without Triton installed (a CPU-only build): ``not-needed``,
    Inductor generates no Triton kernel there, and the key term would only cost a cold cache.
    Otherwise ``needed``, when the layout is 2.13/2.14's: ``rand`` / ``randn`` static methods that
    call ``TritonOverrides._can_use_4x_random`` and emit the 4x helpers, and ``_can_use_4x_random`` a
    static method without parameters that tests ``triton_tensor_ndim`` (the 1-D condition). Any other
    layout (a 4x helper emitted without that gate, a gate of another shape) -> ``PatchRefused``.

Hazards
    * Random sequences of compiled CUDA kernels change (to the pre-2.13 draw): a run that relied on
      2.13/2.14's exact compiled dropout masks for a seed gets other (correct) masks.
    * Keys change once for every graph while the fix is applied (a cold FX graph / AOTAutograd cache
      after installing the fix), on CPU graphs too: the key term does not ask whether a graph draws
      random numbers on a GPU.
    * ``config.align_random_eager`` and ``config.fallback_random`` are untouched; both already avoid
      the 4x path.

Patch points (``def _can_use_4x_random`` in ``TritonOverrides``; its callers ``rand`` / ``randn``):
2.13.0 ``codegen/triton.py`` :2089 (callers :2081 / :2111); 2.14.1 :2154 (:2146 / :2176); 2.15.0
:2192 with ``config.use_rand4x`` (upstream's fix).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

FIX_ID = "inductor-rand4x-dropout"
CODEGEN_MODULE = "torch._inductor.codegen.triton"
CONFIG_MODULE = "torch._inductor.config"
OVERRIDES = "TritonOverrides"
#: the one gate of the 4x path on 2.13-2.15
GATE = "_can_use_4x_random"
#: the callers of the gate, and the 4x helper each emits when it answers True
CALLERS = {"rand": "rand4x(", "randn": "randn4x("}
#: torch 2.15's config entry that gates the path (default off)
UPSTREAM_CONFIG = "use_rand4x"
#: upstream's own opt-in (torch 2.15 reads it into ``config.use_rand4x``); honoured the same way here
OPT_IN = "TORCHINDUCTOR_USE_RAND4X"

#: ``rand4x-declined``: one ``rand``/``randn`` op of a generated kernel that would have drawn with
#: ``rand4x``/``randn4x`` and draws with ``tl.rand``/``tl.randn`` instead (counted at codegen, per op);
#: ``key-changed``: an FX graph / AOTAutograd key computed with the term (counted where the core reads
#: the term's detail, :meth:`Rand4xOffFix.cache_key_detail`)
ACTED, log = tally_and_log(FIX_ID, "rand4x-declined", "key-changed")
COUNTS = ACTED.counts


def opted_in() -> bool:
    """Whether the user asked for the 4x path with upstream's switch (``TORCHINDUCTOR_USE_RAND4X=1``,
    read as torch 2.15 reads it: exactly ``"1"``)."""
    return os.environ.get(OPT_IN) == "1"


def codegen_in_effect() -> str:
    """The random codegen this fix leaves in effect now (the key term's detail)."""
    return f"rand4x opted in ({OPT_IN}=1)" if opted_in() else "rand4x off"


def _declining(original: Callable[[], Any]) -> Callable[[], Any]:
    @functools.wraps(original)
    def _can_use_4x_random() -> Any:
        if opted_in():
            return original()
        if original():
            COUNTS["rand4x-declined"] += 1
        return False

    return _can_use_4x_random


def _static_function(owner: type, name: str) -> types.FunctionType | None:
    raw = vars(owner).get(name)
    if raw is None:
        return None
    if not isinstance(raw, staticmethod) or not isinstance(raw.__func__, types.FunctionType):
        raise PatchRefused(f"{CODEGEN_MODULE}.{OVERRIDES}.{name} is {raw!r}, expected a static method")
    return raw.__func__


def _string_constants(func: types.FunctionType) -> str:
    return " ".join(c for c in func.__code__.co_consts if isinstance(c, str))


def gate_layout(overrides: type) -> bool:
    """Whether ``overrides`` (``TritonOverrides``) has 2.13-2.15's 4x gate (True) or no 4x path at all
    (False, 2.12 and older); :class:`PatchRefused` for any other layout."""
    callers = {}
    for name in CALLERS:
        func = _static_function(overrides, name)
        if func is None:
            raise PatchRefused(f"{CODEGEN_MODULE}.{OVERRIDES} has no {name}: unknown codegen layout")
        callers[name] = func
    emits = {name: helper in _string_constants(callers[name]) for name, helper in CALLERS.items()}
    gate = _static_function(overrides, GATE)
    if gate is None:
        if any(emits.values()):
            raise PatchRefused(f"{OVERRIDES}.rand/randn emit a 4x helper without {GATE}: unknown codegen layout")
        return False
    if gate.__code__.co_argcount or gate.__code__.co_kwonlyargcount or gate.__code__.co_flags & 0x0C:
        raise PatchRefused(f"{OVERRIDES}.{GATE} takes parameters: unknown codegen layout")
    if "triton_tensor_ndim" not in gate.__code__.co_names:
        raise PatchRefused(f"{OVERRIDES}.{GATE} does not test triton_tensor_ndim (the 1-D condition): unknown layout")
    for name, func in callers.items():
        if not emits[name] or GATE not in func.__code__.co_names:
            raise PatchRefused(f"{OVERRIDES}.{name} does not emit {CALLERS[name]}...) through {GATE}: unknown layout")
    return True


def _overrides() -> type:
    found = vars(imported_module(CODEGEN_MODULE)).get(OVERRIDES)
    if not isinstance(found, type):
        raise PatchRefused(f"{CODEGEN_MODULE}.{OVERRIDES} is {found!r}, expected a class: unknown Inductor layout")
    return found


class Rand4xOffFix(Fix):
    """Turns Inductor's 4x random path off unless opted in, and keys it (see the module doc)."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self._applied = False

    def probe(self) -> ProbeResult:
        if not gate_layout(_overrides()):
            return ProbeResult(
                False,
                f"{OVERRIDES} has no 4x random path ({GATE} absent, rand/randn emit tl.rand/tl.randn): the masks "
                "are drawn per element",
            )
        config = imported_module(CONFIG_MODULE)
        if hasattr(config, UPSTREAM_CONFIG):
            return ProbeResult(
                False,
                f"upstream's gate is in place: torch._inductor.config.{UPSTREAM_CONFIG} = "
                f"{getattr(config, UPSTREAM_CONFIG)!r} (off unless {OPT_IN}=1; pytorch#198333)",
            )
        if importlib.util.find_spec("triton") is None:
            return ProbeResult(False, "Triton is not installed: Inductor generates no Triton kernels here")
        return ProbeResult(
            True,
            f"{OVERRIDES}.{GATE} lets 1-D CUDA Triton kernels draw with triton_helpers.rand4x and "
            f"torch._inductor.config has no {UPSTREAM_CONFIG} gate: dropout masks repeat in groups of four and "
            "the checkpoint recompute draws another mask (pytorch#198333)",
        )

    def apply(self) -> None:
        overrides = _overrides()
        if not gate_layout(overrides):  # pragma: no cover - the probe said needed
            raise PatchRefused(f"{OVERRIDES} has no {GATE} to patch")
        self.patches.wrap(overrides, GATE, _declining, signature=())
        self._applied = True
        log.debug(
            "%s: %s.%s answers False unless %s=1 (the compile caches keyed on it)", FIX_ID, OVERRIDES, GATE, OPT_IN
        )

    def revert(self) -> list[str]:
        self._applied = False
        return super().revert()

    def cache_key_detail(self) -> str:
        """The random codegen in effect (``rand4x off``, or opted in), for the compile caches' key term;
        counts ``key-changed``."""
        if not self._applied:
            return ""
        COUNTS["key-changed"] += 1
        return codegen_in_effect()
