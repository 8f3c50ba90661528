"""fp8-minmax-store: Inductor's Triton ``minimum``/``maximum`` in the ``tl.where`` form, keyed.

Background (Triton issue triton-lang/triton#11111; cause pytorch/pytorch#186933; torchao PRs
pytorch/ao#4652 and #4657)
    From torch 2.14 ``TritonOverrides.minimum/maximum`` (``torch/_inductor/codegen/triton.py``)
    emit ``tl.minimum(a, b, tl.PropagateNan.ALL)`` / ``tl.maximum(...)`` on CUDA (2.12 and 2.13
    emit that only under ROCm, and the ``tl.where``-based ``triton_helpers.minimum/maximum`` on
    CUDA). The ``PropagateNan.ALL`` form lowers to PTX ``min.NaN``/``max.NaN``, and Triton 3.8
    then mis-lowers a neighbouring transposed, vectorised 1-byte store: the compiled dynamic-scaling
    cast of float8 training (``amax``, ``scale``, ``clamp(-max, max)``, ``.to(float8)``, writing
    ``y`` and ``y.t().contiguous()``) stores wrong bytes in the transposed copy on some launch
    configs, some decoding as NaN/Inf. No error; intermittent NaN/Inf or loss spikes in training.
    On one H200 with torch 2.14.1 / Triton 3.8.0, 34 of 152 launch configs of 16 such casts wrote
    other bytes than eager (every case); torch 2.15.0 / Triton 3.9.0 wrote eager's bytes in the same
    sweep (docs/investigated.md).

The fix (torchao 0.18's ``torchao/float8/_inductor_patch.py``, for every user, plus a cache key)
    * ``TritonOverrides.minimum`` / ``maximum`` (static methods, also those of
      ``TritonKernelOverrides``, which inherits them) are wrapped to emit
      ``tl.where((a < b) | (a != a), a, b)`` / ``tl.where((a > b) | (a != a), a, b)`` inline:
      the same NaN semantics (a NaN ``a`` is chosen by ``a != a``; a NaN ``b`` makes the comparison
      false, so ``b`` is chosen; for integers ``a != a`` is false), no ``PropagateNan``. Not the
      ``triton_helpers`` functions: torch 2.14 rewrote those to ``PropagateNan.ALL`` as well.
      An operand that is not a plain name (Inductor passes CSE'd names) is parenthesised.
    * The fix's effect is ``compiled`` (its spec), so torchfix-core keys the FX graph and
      AOTAutograd caches on it while it is applied (``torchfix_core._cache_key``: one term per
      compiled-effect fix on the object both keys hash). Its detail (:meth:`MinMaxWhereFix.cache_key_detail`)
      is the min/max codegen in effect, ``TritonOverrides.minimum("a", "b")`` and ``maximum``, so
      torchao's override taking over changes the key too. An entry compiled without the fix (the
      ``PropagateNan`` kernels in its Python module) has no term in its key, so a process with the
      fix never loads it. It can only add misses: a term is added, nothing is removed (one cold
      miss per graph once the fix is installed).

Probe (live objects, no version check)
    ``TritonKernelOverrides.minimum("a", "b")`` and ``maximum`` are called: ``PropagateNan`` in
    either is the bug's codegen (``needed``); anything else (torch 2.13's helpers, torchao's
    override already in place) is ``not-needed``, naming torchao when its ``_PATCHED`` flag is set.
    A ROCm build (``torch.version.hip``) is ``not-needed``: the miscompile is in the NVIDIA PTX
    lowering, and ROCm's codegen was never validated here. So is a torch without Triton (a CPU-only
    build): Inductor generates no Triton kernel there, and the key term would only cost a cold cache.
    ``minimum``/``maximum`` not static methods of ``TritonOverrides`` -> ``PatchRefused`` (the
    core refuses an unknown ``FxGraphHashDetails`` layout the same way, before anything is patched).

Hazards
    * The reductions (``amax``) go through ``triton_helpers.max2``/``maximum``, which keep
      ``PropagateNan.ALL`` on 2.14; the measured failures are in the pointwise cast kernel, which
      this changes, and torchao changes the same two methods.
    * torchao 0.18's ``convert_to_float8_training`` replaces the same two methods after the fix
      (its flag is set only by its own patch): the kernels are the same; the key term records
      torchao's codegen then, and a revert leaves torchao's methods in place (reported).
    * Keys change once for every graph (a cold FX graph / AOTAutograd cache after installing the
      fix), on CPU too: the key term does not ask whether a graph will generate Triton code.

Patch points (``def minimum`` / ``def maximum`` in ``TritonOverrides``; the core's key term at ``FxGraphHashDetails.__init__``):
2.14.1 ``codegen/triton.py`` :1596 / :1601, ``codecache.py`` :1481; 2.15.0 :1605 / :1610, :1504.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from typing import Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module
from torchfix_core.tallies import tally_and_log

FIX_ID = "fp8-minmax-store"
CODEGEN_MODULE = "torch._inductor.codegen.triton"
OVERRIDES = "TritonOverrides"
KERNEL_OVERRIDES = "TritonKernelOverrides"
#: torchao's float8 workaround (0.18+) and its flag
TORCHAO_PATCH = "torchao.float8._inductor_patch"

#: ``where-min-max-emitted``: one ``minimum``/``maximum`` emitted in the ``tl.where`` form (per op of
#: a generated Triton kernel); ``key-changed``: an FX graph / AOTAutograd key computed with the term
#: (counted where the core reads the term's detail, :meth:`MinMaxWhereFix.cache_key_detail`)
ACTED, log = tally_and_log(FIX_ID, "where-min-max-emitted", "key-changed")
COUNTS = ACTED.counts


def _operand(value: object) -> str:
    """``value`` as Inductor passes it (a CSE'd name), parenthesised when it is not a plain name."""
    text = str(value)
    return text if text.isidentifier() else f"({text})"


def where_minimum(a: object, b: object) -> str:
    """Triton source of ``minimum(a, b)`` propagating NaN without ``tl.PropagateNan``."""
    a, b = _operand(a), _operand(b)
    return f"tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})"


def where_maximum(a: object, b: object) -> str:
    """Triton source of ``maximum(a, b)`` propagating NaN without ``tl.PropagateNan``."""
    a, b = _operand(a), _operand(b)
    return f"tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})"


def _emitting(form: Callable[[object, object], str]) -> Callable[[Callable[..., str]], Callable[..., str]]:
    def make(original: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(original)
        def emit(a: object, b: object) -> str:
            COUNTS["where-min-max-emitted"] += 1
            return form(a, b)

        return emit

    return make


def emitted_codegen(overrides: type) -> tuple[str, str]:
    """What ``overrides`` emits for ``minimum("a", "b")`` and ``maximum("a", "b")`` now (this fix's
    own wrappers are read without counting an emission)."""
    forms = []
    for name, ours in (("minimum", where_minimum), ("maximum", where_maximum)):
        func = getattr(overrides, name)
        forms.append(ours("a", "b") if getattr(func, "__torchfix_fix__", None) == FIX_ID else str(func("a", "b")))
    return forms[0], forms[1]


def _class(module: types.ModuleType, name: str) -> type:
    found = vars(module).get(name)
    if not isinstance(found, type):
        raise PatchRefused(f"{module.__name__}.{name} is {found!r}, expected a class: unknown Inductor layout")
    return found


def _torchao_patched() -> bool:
    module = sys.modules.get(TORCHAO_PATCH)
    return bool(getattr(module, "_PATCHED", False))


class MinMaxWhereFix(Fix):
    """Emits Inductor's Triton min/max in the ``tl.where`` form and keys it (see the module doc)."""

    def __init__(self, fix_id: str) -> None:
        super().__init__(fix_id)
        self._overrides: type | None = None

    def _layout(self) -> tuple[type, type]:
        codegen = imported_module(CODEGEN_MODULE)
        overrides, kernel_overrides = _class(codegen, OVERRIDES), _class(codegen, KERNEL_OVERRIDES)
        if not issubclass(kernel_overrides, overrides):
            raise PatchRefused(f"{KERNEL_OVERRIDES} does not subclass {OVERRIDES}: unknown codegen layout")
        for name in ("minimum", "maximum"):
            raw = vars(overrides).get(name)
            if not isinstance(raw, staticmethod) or not isinstance(raw.__func__, types.FunctionType):
                raise PatchRefused(f"{CODEGEN_MODULE}.{OVERRIDES}.{name} is {raw!r}, expected a static method")
            if any(name in vars(c) for c in kernel_overrides.__mro__[: kernel_overrides.__mro__.index(overrides)]):
                raise PatchRefused(f"{KERNEL_OVERRIDES} defines its own {name}: unknown codegen layout")
        return overrides, kernel_overrides

    def probe(self) -> ProbeResult:
        import torch

        _, kernel_overrides = self._layout()
        if getattr(torch.version, "hip", None):
            return ProbeResult(
                False,
                f"a ROCm build (HIP {torch.version.hip}): the miscompile is in Triton's NVIDIA lowering of "
                "min.NaN/max.NaN; ROCm codegen left as it is",
            )
        if importlib.util.find_spec("triton") is None:
            return ProbeResult(False, "Triton is not installed: Inductor generates no Triton kernels here")
        minimum, maximum = emitted_codegen(kernel_overrides)
        if "PropagateNan" in minimum or "PropagateNan" in maximum:
            return ProbeResult(
                True,
                f"Inductor emits {minimum} / {maximum}: the PropagateNan min/max that Triton 3.8 mis-lowers next "
                "to transposed fp8 stores (triton-lang/triton#11111)",
            )
        if _torchao_patched():
            return ProbeResult(False, f"torchao's float8 workaround ({TORCHAO_PATCH}) already emits {minimum}")
        return ProbeResult(False, f"Inductor emits {minimum} / {maximum}: no PropagateNan min/max")

    def apply(self) -> None:
        overrides, _ = self._layout()
        self.patches.wrap(overrides, "minimum", _emitting(where_minimum))
        self.patches.wrap(overrides, "maximum", _emitting(where_maximum))
        self._overrides = overrides
        log.debug("%s: %s.minimum/maximum emit the tl.where form (the compile caches keyed on it)", FIX_ID, OVERRIDES)

    def cache_key_detail(self) -> str:
        """The min/max codegen in effect (this fix's, or torchao's after it took over), for the
        compile caches' key term; counts ``key-changed``."""
        if self._overrides is None:
            return ""
        COUNTS["key-changed"] += 1
        return " / ".join(emitted_codegen(self._overrides))
