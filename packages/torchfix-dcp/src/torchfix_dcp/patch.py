"""dcp-fqn-orig-mod: the compiler's ``_orig_mod`` prefix behind ``checkpoint_wrapper`` in DCP's FQNs.

The bug (pytorch/torchtitan#2622; no pytorch fix, torch 2.8-2.15)
    ``torch.distributed.checkpoint.state_dict._get_fqns`` turns a parameter's name into its
    canonical FQN, the key of ``get_model_state_dict`` / ``get_state_dict`` and of the optimizer
    state. It first removes ``_checkpoint_wrapped_module.`` from the whole name, then walks the
    module tree segment by segment, dropping ``_orig_mod`` only where the object it stands on *is*
    an ``OptimizedModule``. With ``checkpoint_wrapper(torch.compile(block))`` (activation
    checkpointing applied after compiling, e.g. ``apply_activation_checkpointing`` over compiled
    blocks) the name ``layers.0._checkpoint_wrapped_module._orig_mod.lin.weight`` loses the wrapper
    segment first, so at ``_orig_mod`` the walk stands on the ``CheckpointWrapper``, takes the
    generic branch and keeps the segment (``CheckpointWrapper.__getattr__`` forwards the lookup, so
    nothing fails): ``layers.0._orig_mod.lin.weight``. ``torch.compile(checkpoint_wrapper(block))``
    and a compiled block without the wrapper give ``layers.0.lin.weight``. A checkpoint saved that
    way does not load strictly into the plain (or differently wrapped) model, and with
    ``strict=False`` nothing of those blocks loads, silently.

The fix (RUNTIME: state-dict keys at run time; nothing torch compiles changes)
    * ``_get_fqns`` (module attribute; every caller in ``state_dict.py`` calls it by global name) is
      wrapped: when ``skip_compiler_prefix`` is true and the original's FQN kept an ``_orig_mod``
      segment, the wrapper walks the same name through the live module tree as torch's walk does
      and drops exactly the ``_orig_mod`` segments read on an ``ActivationWrapper``
      (``CheckpointWrapper``, ``OffloadWrapper``) whose wrapped module (through nested wrappers) is
      an ``OptimizedModule``: the compiler prefix torch meant to skip. An attribute of a user's
      module that happens to be called ``_orig_mod`` is kept (no ``OptimizedModule`` behind it), and
      a walk that does not reproduce the original's FQN keeps the original (noted in the report).
      ``skip_compiler_prefix=False`` (the spelling torch's loaders ask for, with the prefix) is
      untouched, so ``_load_model_state_dict`` maps the canonical key to the real one as it does
      for every compiled module.
    * Old checkpoints, written with ``_orig_mod`` keys by unpatched torch, still load:
      - ``set_model_state_dict`` / ``set_state_dict``: ``_load_model_state_dict`` is wrapped; where
        the given state dict holds a key in the old spelling of one of the model's parameters (what
        torch's own ``_get_fqns`` gives for it) and not the new one, the key is renamed to the new
        spelling first (torch's loader then maps it to the module's real key). Same for
        ``_load_optim_state_dict`` (the ``state`` keys and ``param_groups`` params, nested or
        flattened).
      - ``torch.distributed.checkpoint.load``: ``default_planner.create_default_local_load_plan``
        (called by ``DefaultLoadPlanner.create_local_plan`` by global name) is wrapped: a requested
        key missing from the checkpoint's metadata whose spelling with the dropped ``_orig_mod``
        segments (the renames this fix made in this process, at segment boundaries: nested keys
        such as ``model.<fqn>`` or ``optim.state.<fqn>.exp_avg`` included) is there is planned
        against the metadata of that spelling, and its read items read storage under it
        (``ReadItem.storage_index``) while writing into the requested key (``dest_index``). Only
        keys that would otherwise be missing are touched.
      - Into a model wrapped otherwise (plain, ``compile(checkpoint_wrapper(block))``: the training ->
        inference reload of torchtitan#2622), whose keys never had the prefix and of which this
        process renamed nothing: a key the loader asks for and does not find (a requested key
        missing from the checkpoint's metadata; a model FQN, or an optimizer's parameter FQN,
        missing from the given state dict) is matched to the one key it does not ask for that equals
        it once that key's ``_orig_mod`` segments are removed (``layers.0._orig_mod.lin.weight`` for
        ``layers.0.lin.weight``), and read under it / renamed to it, counted as above. Two or more
        such keys: it stays missing (torch's error), noted as ``old-key-ambiguous``. A key torch
        finds is never touched, and a key the loader asks for is never a candidate.

The probe
    Runs torch's own ``_get_fqns`` code object on ``Sequential(CheckpointWrapper(stand-in))``, its
    globals' ``torch`` seen through a view whose ``_dynamo.eval_frame.OptimizedModule`` is the
    stand-in class (a module holding ``_orig_mod``): importing ``torch.distributed.checkpoint.state_dict``
    does not import ``torch._dynamo`` on every release (2.14.1 does not), and a real
    ``OptimizedModule`` needs it, so the probe neither imports it nor builds one. It first checks that
    the stand-in is recognised where the walk stands on it directly (``0._orig_mod.w`` -> ``0.w``),
    then reads the name behind the wrapper: ``0._orig_mod.w`` is the bug, ``0.w`` is fixed; anything
    else, or code that does not look up ``torch._dynamo.eval_frame.OptimizedModule`` at call time,
    refuses the fix. The probe builds no tensor from the random generator.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
from typing import Any, Callable

from torchfix_core import Fix, PatchRefused, ProbeResult
from torchfix_core.probes import imported_module, isolated
from torchfix_core.tallies import tally_and_log

FIX_ID = "dcp-fqn-orig-mod"
MODULE = "torch.distributed.checkpoint.state_dict"
PLANNER = "torch.distributed.checkpoint.default_planner"
PREFIX_SEGMENT = "_orig_mod"

ACTED, log = tally_and_log(FIX_ID, "fqn-compiler-prefix-dropped", "old-key-renamed-on-load", "old-checkpoint-key-read")

GET_FQNS_PARAMETERS = ("model", "name", "dsd_fqn_modifiers", "skip_ddp_prefix", "skip_compiler_prefix")
LOAD_MODEL_PARAMETERS = ("model", "state_dict", "info")
LOAD_OPTIM_PARAMETERS = ("model", "optimizers", "state_dict", "info")
PLAN_PARAMETERS = ("state_dict", "metadata", "strict")

#: names of ``state_dict.py`` the wrapper's walk reads, as torch's walk does
WALK_GLOBALS = ("_CHECKPOINT_PREFIX", "DDP", "FSDP", "_FLAT_PARAM", "FSDP_WRAPPED_MODULE", "_iterate_valid_model_state")

#: new FQN -> the old spelling torch's ``_get_fqns`` gave it, for every FQN this fix changed in
#: this process (what the checkpoint planner falls back to); one entry per parameter or buffer
RENAMED: dict[str, str] = {}


def _optimized_module() -> type | None:
    """``OptimizedModule`` where Dynamo is imported; None where it is not (no compiled module exists)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(eval_frame, "OptimizedModule", None)


def _compiled_behind_wrapper(obj: Any, optimized: type) -> bool:
    """Whether ``obj._orig_mod`` is the compiler prefix of an ``OptimizedModule`` that activation
    wrappers (``CheckpointWrapper``, ``OffloadWrapper``, nested) hold: the segment torch should skip."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import ActivationWrapper

    inner = obj
    while isinstance(inner, ActivationWrapper):
        inner = inner._checkpoint_wrapped_module
    if inner is obj or not isinstance(inner, optimized):
        return False
    return getattr(obj, PREFIX_SEGMENT, None) is getattr(inner, PREFIX_SEGMENT, None)


def _walk(
    sd: types.ModuleType, model: Any, name: str, dsd_fqn_modifiers: str, skip_ddp_prefix: bool, optimized: type
) -> list[tuple[str, bool]] | None:
    """Torch's walk of ``_get_fqns`` (same branches, same order; ``skip_compiler_prefix=True``),
    returning the segments it appends, each with whether it is a compiler prefix behind an activation
    wrapper; None where torch's walk returns otherwise (FSDP1's flat parameter) or cannot be followed."""
    import torch.nn as nn

    prefix = sd._CHECKPOINT_PREFIX
    name = name.replace(prefix, "")
    if "." not in name:
        return None
    segments = name.split(".")
    out: list[tuple[str, bool]] = []
    obj = model
    try:
        for i, segment in enumerate(segments):
            if isinstance(obj, sd.DDP):
                obj = obj.module
                if not skip_ddp_prefix:
                    out.append((segment, False))
            elif isinstance(obj, sd.FSDP):
                if i < len(segments) - 1 and segments[i + 1] == sd._FLAT_PARAM:
                    return None
                obj = getattr(obj, sd.FSDP_WRAPPED_MODULE)
                if segment != sd.FSDP_WRAPPED_MODULE:
                    out.append((segment, False))
                    obj = getattr(obj, segment)
            elif isinstance(obj, optimized):
                obj = getattr(obj, PREFIX_SEGMENT)
            else:
                if hasattr(obj, dsd_fqn_modifiers):
                    removed = getattr(obj, dsd_fqn_modifiers)().get(segment)
                    if removed and hasattr(obj, removed):
                        obj = getattr(obj, removed)
                out.append((segment, segment == PREFIX_SEGMENT and _compiled_behind_wrapper(obj, optimized)))
                if segment != nn.modules.module._EXTRA_STATE_KEY_SUFFIX:
                    obj = getattr(obj, segment)
    except AttributeError:
        return None
    return out


def _make_get_fqns(sd: types.ModuleType) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def _get_fqns(
            model: Any,
            name: str,
            dsd_fqn_modifiers: str = "_fqn_modifiers",
            skip_ddp_prefix: bool = True,
            skip_compiler_prefix: bool = True,
        ) -> Any:
            fqns = original(model, name, dsd_fqn_modifiers, skip_ddp_prefix, skip_compiler_prefix)
            if not skip_compiler_prefix or PREFIX_SEGMENT not in name or len(fqns) != 1:
                return fqns
            optimized = _optimized_module()
            (fqn,) = fqns
            if optimized is None or PREFIX_SEGMENT not in fqn.split("."):
                return fqns
            walked = _walk(sd, model, name, dsd_fqn_modifiers, skip_ddp_prefix, optimized)
            if walked is None or not any(drop for _, drop in walked):
                return fqns
            prefix = sd._CHECKPOINT_PREFIX
            if ".".join(s for s, _ in walked).replace(prefix, "") != fqn:
                ACTED.note("walk-differs", f"{name!r}: torch's FQN {fqn!r} kept (the walk did not reproduce it)")
                return fqns
            new = ".".join(s for s, drop in walked if not drop).replace(prefix, "")
            RENAMED[new] = fqn
            ACTED.counts["fqn-compiler-prefix-dropped"] += 1
            return {new}

        return _get_fqns

    return make


def _spellings(sd: types.ModuleType, model: Any, names: Any, dsd_fqn_modifiers: str) -> dict[str, str]:
    """Old spelling -> new FQN of each of ``names`` (the model's state names) that this fix renames."""
    original = sd._get_fqns.__wrapped__
    table: dict[str, str] = {}
    for name in names:
        if PREFIX_SEGMENT not in name:
            continue
        news, olds = sd._get_fqns(model, name, dsd_fqn_modifiers), original(model, name, dsd_fqn_modifiers)
        if len(news) == 1 and len(olds) == 1 and news != olds:
            table[next(iter(olds))] = next(iter(news))
    return table


def _replace_segments(key: str, table: dict[str, str]) -> str | None:
    """``key`` with its first dotted run of whole segments found in ``table`` replaced by its value
    (``optim.state.<fqn>.exp_avg``), or None."""
    segments = key.split(".")
    for i in range(len(segments)):
        for j in range(len(segments), i, -1):
            found = table.get(".".join(segments[i:j]))
            if found is not None:
                return ".".join([*segments[:i], found, *segments[j:]])
    return None


def _has_prefix_segment(keys: Any) -> bool:
    return any(isinstance(k, str) and PREFIX_SEGMENT in k for k in keys)


def _stripped(key: str) -> str:
    """``key`` without its ``_orig_mod`` segments."""
    return ".".join(s for s in key.split(".") if s != PREFIX_SEGMENT)


def _match_stripped(missing: Any, unexpected: Any, where: str) -> dict[str, str]:
    """Old key -> missing key, for each of ``missing`` (keys the loader asks for and does not find)
    that equals exactly one of ``unexpected`` (keys it holds and does not ask for) once that one's
    ``_orig_mod`` segments are removed: a key an unpatched torch wrote for another wrapping of the
    same model (``layers.0._orig_mod.lin.weight`` for ``layers.0.lin.weight``). A missing key that
    two or more keys match stays missing (noted as ``old-key-ambiguous``)."""
    index: dict[str, list[str]] = {}
    for key in unexpected:
        if isinstance(key, str) and PREFIX_SEGMENT in key.split("."):
            index.setdefault(_stripped(key), []).append(key)
    table: dict[str, str] = {}
    if not index:
        return table
    for key in missing:
        found = index.get(key)
        if found is None:
            continue
        if len(found) == 1:
            table[found[0]] = key
        else:
            ACTED.note("old-key-ambiguous", f"{where}: {key!r} left missing, matched by {sorted(found)}")
    return table


def _canonical(sd: types.ModuleType, model: Any, names: Any, dsd_fqn_modifiers: str) -> set[str]:
    """The FQNs (as this fix gives them) of the model's state names ``names``: the keys the loader
    asks for."""
    out: set[str] = set()
    for name in names:
        out.update(sd._get_fqns(model, name, dsd_fqn_modifiers))
    return out


def _optim_fqns(state_dict: dict[str, Any], expected: set[str]) -> set[str]:
    """The parameter FQNs an optimizer state dict refers to: ``state`` keys and ``param_groups``
    params (nested), or the FQN inside a flattened key (``state.<fqn>.exp_avg``,
    ``param_groups.<fqn>.lr``): the shortest leading run that is one of ``expected`` or, with
    ``_orig_mod`` segments removed, equals one of them."""
    out: set[str] = set()
    state, groups = state_dict.get("state"), state_dict.get("param_groups")
    if isinstance(state, dict):
        out.update(k for k in state if isinstance(k, str))
    if isinstance(groups, list):
        out.update(p for g in groups if isinstance(g, dict) for p in g.get("params", ()) if isinstance(p, str))
    for key in state_dict:
        if not isinstance(key, str) or not key.startswith(("state.", "param_groups.")):
            continue
        segments = key.split(".")[1:]
        for j in range(1, len(segments)):
            run = ".".join(segments[:j])
            if run in expected or (PREFIX_SEGMENT in segments[:j] and _stripped(run) in expected):
                out.add(run)
                break
    return out


def _make_load_model(sd: types.ModuleType) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def _load_model_state_dict(model: Any, state_dict: Any, info: Any) -> Any:
            if state_dict and _has_prefix_segment(state_dict):
                modifiers = info.dsd_fqn_modifiers
                names = [n for n, _ in sd._iterate_valid_model_state(model, modifiers)]
                for old, new in _spellings(sd, model, names, modifiers).items():
                    if old in state_dict and new not in state_dict:
                        state_dict[new] = state_dict.pop(old)
                        ACTED.counts["old-key-renamed-on-load"] += 1
                expected = _canonical(sd, model, names, modifiers)
                missing = sorted(k for k in expected if k not in state_dict)
                unexpected = [k for k in state_dict if k not in expected]
                for old, new in _match_stripped(missing, unexpected, "set_model_state_dict").items():
                    state_dict[new] = state_dict.pop(old)
                    ACTED.counts["old-key-renamed-on-load"] += 1
            return original(model, state_dict, info)

        return _load_model_state_dict

    return make


def _rename_optim(state_dict: dict[str, Any], table: dict[str, str]) -> None:
    """Rename old spellings in an optimizer state dict as DCP writes it: nested (``state`` keyed by
    FQN, ``param_groups[*]["params"]`` lists of FQNs) or flattened (``state.<fqn>.<name>``)."""

    def renamed(key: Any, present: Any) -> Any:
        if not isinstance(key, str) or PREFIX_SEGMENT not in key:
            return key
        new = _replace_segments(key, table)
        if new is None or new in present:
            return key
        ACTED.counts["old-key-renamed-on-load"] += 1
        return new

    state, groups = state_dict.get("state"), state_dict.get("param_groups")
    if isinstance(state, dict):
        for key in list(state):
            new = renamed(key, state)
            if new != key:
                state[new] = state.pop(key)
    if isinstance(groups, list):
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("params"), list):
                group["params"] = [renamed(p, ()) for p in group["params"]]
    for key in [k for k in state_dict if isinstance(k, str) and k.startswith(("state.", "param_groups."))]:
        new = renamed(key, state_dict)
        if new != key:
            state_dict[new] = state_dict.pop(key)


def _make_load_optim(sd: types.ModuleType) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def _load_optim_state_dict(model: Any, optimizers: Any, state_dict: Any, info: Any) -> Any:
            if isinstance(state_dict, dict) and state_dict:
                keys = [*state_dict, *(state_dict.get("state") or {})]
                groups = state_dict.get("param_groups")
                if isinstance(groups, list):
                    keys += [p for g in groups if isinstance(g, dict) for p in g.get("params", ())]
                if _has_prefix_segment(keys):
                    names = [n for n, _ in model.named_parameters()]
                    _rename_optim(state_dict, _spellings(sd, model, names, info.dsd_fqn_modifiers))
                    expected = _canonical(sd, model, names, info.dsd_fqn_modifiers)
                    referenced = _optim_fqns(state_dict, expected)
                    missing = sorted(expected - referenced)
                    unexpected = sorted(referenced - expected)
                    _rename_optim(state_dict, _match_stripped(missing, unexpected, "set_optimizer_state_dict"))
            return original(model, optimizers, state_dict, info)

        return _load_optim_state_dict

    return make


def _old_spelling(key: str, available: Any) -> str | None:
    """The old spelling of a requested checkpoint key (a renamed FQN at segment boundaries replaced
    by what torch called it), where the checkpoint holds that spelling."""
    old = _replace_segments(key, RENAMED)
    return old if old is not None and old in available else None


def _make_plan(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def create_default_local_load_plan(state_dict: Any, metadata: Any, strict: bool = True) -> Any:
        available = metadata.state_dict_metadata
        missing = [k for k in state_dict if isinstance(k, str) and k not in available]
        aliases: dict[str, str] = {}
        if missing and RENAMED:
            for key in missing:
                old = _old_spelling(key, available)
                if old is not None:
                    aliases[key] = old
        rest = [k for k in missing if k not in aliases]
        if rest and _has_prefix_segment(available):
            claimed = set(aliases.values())
            unexpected = [k for k in available if k not in state_dict and k not in claimed]
            for old, new in _match_stripped(rest, unexpected, "dcp.load").items():
                aliases[new] = old
        if not aliases:
            return original(state_dict, metadata, strict)
        view = dataclasses.replace(
            metadata, state_dict_metadata={**available, **{new: available[old] for new, old in aliases.items()}}
        )
        plan = original(state_dict, view, strict)
        items = [
            dataclasses.replace(
                item, storage_index=dataclasses.replace(item.storage_index, fqn=aliases[item.storage_index.fqn])
            )
            if item.storage_index.fqn in aliases
            else item
            for item in plan.items
        ]
        ACTED.counts["old-checkpoint-key-read"] += len(aliases)
        log.info("read %d keys of an older checkpoint under their _orig_mod spelling", len(aliases))
        return dataclasses.replace(plan, items=items)

    return create_default_local_load_plan


class _TorchView:
    """``torch`` as torch's ``_get_fqns`` reads it, with ``_dynamo.eval_frame.OptimizedModule`` the
    probe's stand-in (see the module docstring)."""

    def __init__(self, torch: types.ModuleType, stand_in: type) -> None:
        self._torch = torch
        self._dynamo = types.SimpleNamespace(eval_frame=types.SimpleNamespace(OptimizedModule=stand_in))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


def fqns_behind_wrapper(get_fqns: Callable[..., Any]) -> tuple[set[str], set[str]]:
    """torch's ``get_fqns`` code on a stand-in compiled module: ``(FQNs of "0._orig_mod.w" with the
    stand-in reached directly, FQNs of "0._checkpoint_wrapped_module._orig_mod.w" behind a
    ``CheckpointWrapper``)``. Torch 2.8-2.15: ``({"0.w"}, {"0._orig_mod.w"})`` (the bug)."""
    import torch
    import torch.nn as nn
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    code = getattr(get_fqns, "__code__", None)
    if not isinstance(code, types.CodeType) or not {"_dynamo", "eval_frame", "OptimizedModule"} <= set(code.co_names):
        raise PatchRefused(f"{MODULE}._get_fqns does not look up torch._dynamo.eval_frame.OptimizedModule")

    class StandIn(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self._orig_mod = inner

    def body() -> tuple[set[str], set[str]]:
        leaf = nn.Module()
        leaf.w = nn.Parameter(torch.zeros(1))
        run = types.FunctionType(
            code,
            {**get_fqns.__globals__, "torch": _TorchView(torch, StandIn)},
            code.co_name,
            get_fqns.__defaults__,
            get_fqns.__closure__,  # type: ignore[attr-defined]
        )
        direct = run(nn.Sequential(StandIn(leaf)), "0._orig_mod.w")
        wrapped = run(nn.Sequential(CheckpointWrapper(StandIn(leaf))), "0._checkpoint_wrapped_module._orig_mod.w")
        return set(direct), set(wrapped)

    try:
        return isolated(body)  # type: ignore[no-any-return]
    except PatchRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means a layout this probe does not know
        raise PatchRefused(
            f"{MODULE}._get_fqns fails on a stand-in compiled module ({type(exc).__name__}: {exc})"
        ) from None


class DcpFqnOrigModFix(Fix):
    def probe(self) -> ProbeResult:
        sd = imported_module(MODULE)
        planner = sys.modules.get(PLANNER)
        if planner is None or not hasattr(planner, "create_default_local_load_plan"):
            raise PatchRefused(f"{PLANNER}.create_default_local_load_plan not found")
        missing = [
            n
            for n in (*WALK_GLOBALS, "_get_fqns", "_load_model_state_dict", "_load_optim_state_dict")
            if not hasattr(sd, n)
        ]
        if missing:
            raise PatchRefused(f"{MODULE} lacks {', '.join(missing)}")
        get_fqns = sd._get_fqns
        direct, wrapped = fqns_behind_wrapper(getattr(get_fqns, "__wrapped__", get_fqns))
        if direct != {"0.w"}:
            raise PatchRefused(f"_get_fqns keeps the prefix of a compiled module reached directly: {sorted(direct)}")
        if wrapped == {"0.w"}:
            return ProbeResult(False, "_get_fqns drops _orig_mod behind a CheckpointWrapper (fixed upstream)")
        if wrapped != {"0._orig_mod.w"}:
            raise PatchRefused(f"_get_fqns gives {sorted(wrapped)} behind a CheckpointWrapper: unknown layout")
        return ProbeResult(
            True, "_get_fqns keeps _orig_mod of a compiled module behind checkpoint_wrapper (torchtitan#2622)"
        )

    def apply(self) -> None:
        sd = imported_module(MODULE)
        planner = imported_module(PLANNER)
        self.patches.wrap(sd, "_get_fqns", _make_get_fqns(sd), signature=GET_FQNS_PARAMETERS)
        self.patches.wrap(sd, "_load_model_state_dict", _make_load_model(sd), signature=LOAD_MODEL_PARAMETERS)
        self.patches.wrap(sd, "_load_optim_state_dict", _make_load_optim(sd), signature=LOAD_OPTIM_PARAMETERS)
        self.patches.wrap(planner, "create_default_local_load_plan", _make_plan, signature=PLAN_PARAMETERS)

    def runtime_note(self) -> str:
        return f"{len(RENAMED)} FQNs without _orig_mod" if RENAMED else ""
