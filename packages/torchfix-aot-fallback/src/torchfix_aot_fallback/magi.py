"""The ``magi-aot-fallback`` fix: MagiCompiler's AOT mode falls back to JIT per compile state.

The bug
    With AOT on (``MAGI_COMPILE_AOT=1``), ``magi_compiler._api._run_orchestration(state, args,
    kwargs)`` loads an AOT artifact, or calls ``MagiCompileState.aot_compile`` and
    ``save_aot_compile_artifacts``, and lets every exception abort the process (MagiCompiler at
    8e2e47c). Two kinds of failure mean "AOT cannot handle this", not "the model is broken":

    * this model: Dynamo ``Unsupported`` (graph breaks, SimpleFSDP/DTensor code: "Attempted to read
      undefined local variable") and the other "AOT unsupported" errors of the torch-level policy;
    * this torch: on torch 2.10 - 2.13 (every release tested) Magi's AOT path fails for *every*
      model. ``aot_compile`` reads the ``"self"`` closure variable of
      ``AOTCompiledFunction.save_compiled_function``, which is a plain method there
      (``ValueError: tuple.index(x): x not in tuple``), and its artifact save/load calls
      ``CompileArtifacts.serialize`` / ``deserialize``, which are on ``AOTCompiledFunction`` there
      (``AttributeError``). MagiCompiler PR #89's ``except RuntimeError`` would catch neither.

The patch
    :class:`MagiAOTFallbackFix` wraps ``_run_orchestration`` (a module attribute that the
    ``@magi_compile`` wrappers look up at call time, so states created earlier are covered). When the
    call raises and the exception passed through Magi's AOT step (``aot_compile``,
    ``save_aot_compile_artifacts`` or ``load_aot_compile_artifacts``: the frames are checked on the
    traceback, so an error raised later by the compiled code is never touched), the decision is the
    torch-level fix's policy (:func:`torchfix_aot_fallback.policy.classify`, written once) plus the two
    known Magi-internal incompatibilities above, each recognised by its type, the frame that raised it
    and its message. On "fall back": that state only gets ``aot=False`` (a copy of its config),
    its compiled entry and AOT artifacts are cleared, ``torch._dynamo.reset()`` runs, one warning is
    logged (once per model and cause) and the call is re-run, now on Magi's JIT path. Other states
    keep AOT.

    Never falls back for ``AssertionError``, OOM, ``KeyboardInterrupt`` (or any non-``Exception``),
    an exception the model raised while being traced, a required-cache miss, strict mode
    (``TORCHFIX_AOT_FALLBACK_STRICT=1``, ``TORCH_STRICT_PRECOMPILE=1``,
    :func:`torchfix_aot_fallback.api.strict`), or Magi's assert-cache-hit mode (a
    ``CompileConfig.assert_cache_hit`` set to true, in Magi versions that have it): the original
    exception propagates unchanged.

Interplay with the torch-level ``aot-fallback`` fix
    Magi's AOT step calls ``torch.compile(...).aot_compile``, which the torch-level fix wraps. If that
    fix decided there, it would hand Magi a :class:`~torchfix_aot_fallback.fallback.JITFallback`, whose
    ``save_compiled_function`` has no ``"self"`` closure: Magi then raised ``ValueError`` instead of the
    real ``Unsupported``. This wrapper runs Magi's AOT step as the *outer* policy
    (:func:`torchfix_aot_fallback.fallback.outer_policy`), so the torch-level wrapper passes through
    and the fallback is decided once, here, for the whole compile state. Neither fix wraps the other's
    patch point.

Hazards
    ``torch._dynamo.reset()`` is process-wide: plain ``torch.compile`` functions recompile on their
    next call (Magi's JIT states run their captured bytecode and are not affected). A process that
    falls back retries AOT in the next process (no persistent memo on this path).

Upstream: MagiCompiler PR #89 (AOT -> JIT fallback, ``except RuntimeError``), reviewed there for
swallowing ``AssertionError``.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult

from torchfix_aot_fallback import fallback, policy

FIX_ID = "magi-aot-fallback"
ORCHESTRATION_PARAMS = ("state", "args", "kwargs")
_AOT_STEPS = ("aot_compile", "save_aot_compile_artifacts", "load_aot_compile_artifacts")
_STATE_FIELDS = ("compile_config", "compiled_entry", "aot_compiled_fn", "aot_compile_artifacts", "jit_compiled_code")

_log = fallback.FallbackLog(FIX_ID, ("magi-compile",))


def records() -> list[fallback.FallbackRecord]:
    """Every Magi compile state that fell back to JIT in this process, oldest first."""
    return _log.records()


def _unwrapped_code(owner: type, name: str) -> types.CodeType | None:
    func = owner.__dict__.get(name)
    func = inspect.unwrap(func) if callable(func) else None
    code = getattr(func, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def _frames(exc: BaseException) -> list[types.CodeType]:
    codes = []
    tb = exc.__traceback__
    while tb is not None:
        codes.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    return codes


def aot_step_codes(state_cls: type) -> dict[str, types.CodeType]:
    """Code objects of Magi's AOT steps on ``MagiCompileState`` (decorators unwrapped)."""
    codes = {}
    for name in _AOT_STEPS:
        code = _unwrapped_code(state_cls, name)
        if code is not None:
            codes[name] = code
    return codes


def magi_incompatibility(exc: BaseException, steps: dict[str, types.CodeType]) -> str | None:
    """Why ``exc`` is one of Magi's known internal AOT incompatibilities with this torch, or None.

    Recognised only when raised *directly* by Magi's own step (the last traceback frame):

    * ``ValueError`` from ``aot_compile`` looking up the ``"self"`` closure variable of
      ``save_compiled_function`` (torch 2.10 - 2.13: it is a plain method);
    * ``AttributeError`` for ``CompileArtifacts.serialize`` / ``deserialize`` from the save or load
      step (torch 2.10 - 2.13: those are on ``AOTCompiledFunction``).
    """
    frames = _frames(exc)
    last = frames[-1] if frames else None
    if type(exc) is ValueError and last is steps.get("aot_compile") and "not in tuple" in str(exc):
        return "Magi's aot_compile expects a 'self' closure variable on save_compiled_function (absent on this torch)"
    if (
        type(exc) is AttributeError
        and last in (steps.get("save_aot_compile_artifacts"), steps.get("load_aot_compile_artifacts"))
        and "CompileArtifacts" in str(exc)
        and getattr(exc, "name", None) in ("serialize", "deserialize")
    ):
        return f"Magi's AOT artifact I/O calls CompileArtifacts.{exc.name}, which this torch does not have"
    return None


def decide(exc: BaseException, steps: dict[str, types.CodeType]) -> policy.Verdict:
    """The Magi adapter's verdict: the torch-level policy, plus Magi's known incompatibilities.

    Only exceptions that passed through one of Magi's AOT steps qualify. A fatal link anywhere in
    the chain (OOM, ``AssertionError``, non-``Exception``, a model exception observed during tracing,
    a required-cache miss) always propagates, whatever else is recognised.
    """
    if not set(steps.values()) & set(_frames(exc)):
        return policy.Verdict(False, "not raised by Magi's AOT step")
    verdict = policy.classify(exc)
    if verdict.fallback:
        return verdict
    if not policy.classify_load_error(exc):  # a fatal link in the chain: never fall back
        return verdict
    why = magi_incompatibility(exc, steps)
    if why is not None:
        return policy.Verdict(True, f"{why} ({policy.describe(exc)})")
    return verdict


def _assert_cache_hit(config: Any) -> bool:
    """Magi's assert-cache-hit mode (newer Magi): a miss there must raise, never fall back."""
    return bool(getattr(config, "assert_cache_hit", False))


def _aot_eligible(state: Any) -> bool:
    config = getattr(state, "compile_config", None)
    if not getattr(config, "aot", False) or getattr(state, "jit_compiled_code", None) is not None:
        return False
    mode = getattr(getattr(config, "compile_mode", None), "value", None)
    return mode == "MAGI_COMPILE"


def state_name(state: Any) -> str:
    code = getattr(state, "original_code_for_hook", None)
    tag = getattr(state, "model_tag", None) or "?"
    if isinstance(code, types.CodeType):
        return f"{tag} ({code.co_filename}:{getattr(code, 'co_qualname', code.co_name)})"
    return str(tag)


def switch_to_jit(state: Any) -> None:
    """AOT off for this state only; its compiled entry and AOT artifacts cleared; Dynamo reset."""
    import torch

    state.compile_config = state.compile_config.model_copy(update={"aot": False})
    state.compiled_entry = None
    state.aot_compiled_fn = None
    state.aot_compile_artifacts = None
    torch._dynamo.reset()


def _note(rec: fallback.FallbackRecord) -> None:
    _log.add(
        rec,
        f"{rec.function}|{rec.cause}",
        f"torchfix magi-aot-fallback: MagiCompiler AOT compile of {rec.function} is unsupported ({rec.cause}); this "
        f"compile state uses Magi's JIT path for the rest of the process. {policy.STRICT_ENV}=1 makes this an error",
    )


def make_orchestration_wrapper(original: Callable[..., Any], steps: dict[str, types.CodeType]) -> Callable[..., Any]:
    def _run_orchestration(state: Any, args: Any, kwargs: Any) -> Any:
        if not _aot_eligible(state):
            return original(state, args, kwargs)
        try:
            # the torch-level wrapper must not hand Magi a JITFallback (Magi cannot use one): the
            # decision is taken here, once, for the whole compile state
            with fallback.outer_policy():
                return original(state, args, kwargs)
        except Exception as exc:
            if policy.is_strict() or _assert_cache_hit(state.compile_config):
                raise
            verdict = decide(exc, steps)
            if not verdict.fallback:
                raise
            cause = verdict.reason
        switch_to_jit(state)
        _note(fallback.FallbackRecord("magi-compile", state_name(state), cause))
        return original(state, args, kwargs)

    return _run_orchestration


def _closure_codes(func: Any) -> list[types.CodeType]:
    todo = [getattr(func, "__code__", None)]
    out = []
    while todo:
        code = todo.pop()
        if not isinstance(code, types.CodeType):
            continue
        out.append(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return out


class MagiAOTFallbackFix(Fix):
    """MagiCompiler AOT -> JIT fallback per compile state (see the module doc)."""

    def _layout(self) -> tuple[Any, Any, dict[str, types.CodeType]]:
        from magi_compiler import _api
        from magi_compiler.magi_backend.magi_compiler_base import MagiCompileState

        orchestration = _api.__dict__.get("_run_orchestration")
        if not isinstance(orchestration, types.FunctionType):
            raise PatchRefused("magi_compiler._api._run_orchestration is not a Python function")
        for entry in ("_magi_compile_bound_method", "_magi_compile_function"):
            codes = _closure_codes(_api.__dict__.get(entry))
            if not any("_run_orchestration" in c.co_names for c in codes[1:]):
                raise PatchRefused(f"magi_compiler._api.{entry} no longer calls _run_orchestration at call time")
        steps = aot_step_codes(MagiCompileState)
        if set(steps) != set(_AOT_STEPS):
            raise PatchRefused(f"MagiCompileState lacks {sorted(set(_AOT_STEPS) - set(steps))}")
        init_names = set(_closure_codes(MagiCompileState.__dict__.get("__init__"))[0].co_names)
        missing = [f for f in _STATE_FIELDS if f not in init_names]
        if missing:
            raise PatchRefused(f"MagiCompileState no longer sets {missing}")
        from magi_compiler.config import CompileConfig

        if "aot" not in getattr(CompileConfig, "model_fields", {}) or not hasattr(CompileConfig, "model_copy"):
            raise PatchRefused("magi_compiler.config.CompileConfig has no pydantic 'aot' field")
        return _api, orchestration, steps

    def probe(self) -> ProbeResult:
        import torch._dynamo.aot_compile as torch_aot

        _, orchestration, _ = self._layout()
        own_fallback = {"model_copy", "reset"} <= set(orchestration.__code__.co_names)
        problems = []
        save = getattr(getattr(torch_aot, "AOTCompiledFunction", None), "save_compiled_function", None)
        if "self" not in getattr(getattr(save, "__code__", None), "co_freevars", ("self",)):
            problems.append("AOTCompiledFunction.save_compiled_function has no 'self' closure variable")
        artifacts = getattr(torch_aot, "CompileArtifacts", None)
        lost = [m for m in ("serialize", "deserialize") if not hasattr(artifacts, m)]
        if lost:
            problems.append(f"CompileArtifacts has no {'/'.join(lost)}")
        if own_fallback and not problems:
            return ProbeResult(
                False, "Magi's _run_orchestration falls back to JIT itself and its AOT path fits this torch"
            )
        parts = [] if own_fallback else ["Magi's _run_orchestration lets every AOT failure abort the call"]
        if problems:
            parts.append("Magi's AOT path cannot work on this torch (" + "; ".join(problems) + ")")
        return ProbeResult(True, "; ".join(parts) + "; wrapping _run_orchestration")

    def runtime_note(self) -> str:
        recs = records()
        if not recs:
            return "no Magi AOT->JIT fallback in this process"
        return f"Magi AOT->JIT fallbacks in this process: {len(recs)}; last: {recs[-1].function}: {recs[-1].cause}"

    def apply(self) -> None:
        api, _, steps = self._layout()
        self.patches.wrap(
            api,
            "_run_orchestration",
            lambda original: make_orchestration_wrapper(original, steps),
            signature=ORCHESTRATION_PARAMS,
        )
