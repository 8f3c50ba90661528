"""Scenarios of the dcp-fqn-orig-mod tests (a test harness, not shipped): ``python _scenarios.py NAME
[ARGS]`` prints one JSON object last. The models are the shipped reproduction's
(``torchfix_dcp.reproduction``).

* ``keys ORDER``: the keys of ``get_model_state_dict`` / ``get_state_dict`` (model and Adam state)
  of a model wrapped as ``ORDER`` (``reproduction.wrap``), and a strict ``set_model_state_dict``
  into the plain model (its error and traceback).
* ``save DIR``: writes the AC(compile) model's weights and Adam state (one step taken) to DIR: a DCP
  checkpoint of ``get_state_dict`` (``DIR/dcp``) and ``torch.save`` of it (``DIR/state.pt``), plus the
  reference tensors by parameter name (``DIR/reference.pt``).
* ``load DIR [ORDER]``: a fresh model wrapped as ``ORDER`` (default ``ac-compile``; ``plain``,
  ``compile-ac``: the training -> inference reload of torchtitan#2622) and Adam: ``dcp.load`` of
  DIR/dcp into its ``get_state_dict`` then ``set_state_dict`` (strict), and ``set_model_state_dict`` /
  ``set_optimizer_state_dict`` of DIR/state.pt; whether each restored every reference tensor (or
  its error).
* ``ambiguous DIR``: keys with two ``_orig_mod`` spellings of one missing key, and keys torch finds
  next to an ``_orig_mod`` spelling of them: ``dcp.load`` and ``set_model_state_dict`` leave both
  as torch has them.
* ``plain DIR``: ``dcp.load`` of DIR/dcp into a plain model's ``get_model_state_dict`` (its error).
* ``ranks WORLD``: WORLD spawned gloo ranks: AC(compile) blocks and the model ``fully_shard``-ed,
  ``dcp.save`` of ``get_model_state_dict``, then ``dcp.load`` into a plain ``fully_shard``-ed model;
  the keys and whether the plain model got the weights (the full tensors compared on rank 0).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import traceback
import warnings
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)
from torchfix_dcp.reproduction import model_class, prefixed, wrap

warnings.filterwarnings("ignore")
FIX = "dcp-fqn-orig-mod"


def _report() -> dict[str, Any]:
    from torchfix_core.testing import report_of

    return report_of(FIX)


def _failure(exc: BaseException) -> dict[str, Any]:
    return {
        "ok": False,
        "error_type": f"{type(exc).__module__}.{type(exc).__name__}",
        "error": str(exc),
        "traceback": traceback.format_exc(),
    }


def _trained(model_cls: Any) -> tuple[Any, Any, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = wrap(model_cls(), "ac-compile")
    optim = torch.optim.Adam(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optim.step()
    reference = {k: v.detach().clone() for k, v in _plain_named(model).items()}
    return model, optim, reference


def _plain_named(model: Any) -> dict[str, torch.Tensor]:
    """Parameters by the plain model's names (``layers.0.lin.weight``), whatever wraps the blocks."""
    out = {}
    for i, layer in enumerate(model.layers):
        inner = layer
        while True:
            if "_checkpoint_wrapped_module" in inner._modules:
                inner = inner._checkpoint_wrapped_module
            elif "_orig_mod" in inner._modules:
                inner = inner._orig_mod
            else:
                break
        for k, v in inner.state_dict().items():
            out[f"layers.{i}.{k}"] = v
    return out


def keys(order: str) -> dict[str, Any]:
    model_cls = model_class()
    model, optim, _ = _trained(model_cls) if order == "ac-compile" else (wrap(model_cls(), order), None, None)
    if optim is None:
        optim = torch.optim.Adam(model.parameters())
    msd, osd = get_state_dict(model, optim)
    out: dict[str, Any] = {"ok": True, "model_keys": sorted(msd), "optim_keys": sorted(osd["state"])}
    out["prefixed"] = prefixed(msd) + prefixed(osd["state"])
    try:
        set_model_state_dict(model_cls(), get_model_state_dict(model))
    except RuntimeError as exc:
        out.update(_failure(exc))
    out["report"] = _report()
    return out


def save(folder: str) -> dict[str, Any]:
    model, optim, reference = _trained(model_class())
    msd, osd = get_state_dict(model, optim)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(folder, "dcp"))
    torch.save({"model": msd, "optim": osd}, os.path.join(folder, "state.pt"))
    torch.save(
        {"reference": reference, "exp_avg": {k: v["exp_avg"] for k, v in osd["state"].items()}},
        os.path.join(folder, "reference.pt"),
    )
    return {"ok": True, "model_keys": sorted(msd), "prefixed": prefixed(msd), "report": _report()}


def _restored(model: Any, optim: Any, saved: dict[str, Any]) -> dict[str, bool]:
    got = _plain_named(model)
    weights = all(torch.equal(got[k], v) for k, v in saved["reference"].items())
    exp_avg = [s["exp_avg"] for s in optim.state.values() if "exp_avg" in s]
    adam = len(exp_avg) == len(saved["exp_avg"]) and all(
        any(torch.equal(a, b) for b in saved["exp_avg"].values()) for a in exp_avg
    )
    return {"weights": weights, "adam": adam}


def _fresh(model_cls: Any, order: str) -> tuple[Any, Any]:
    torch.manual_seed(1)  # other initial weights than the saved ones
    model = wrap(model_cls(), order)
    return model, torch.optim.Adam(model.parameters(), lr=0.1)


def load(folder: str, order: str = "ac-compile") -> dict[str, Any]:
    model_cls = model_class()
    saved = torch.load(os.path.join(folder, "reference.pt"))
    out: dict[str, Any] = {"ok": True}
    model, optim = _fresh(model_cls, order)
    msd, osd = get_state_dict(model, optim)
    out["requested_keys"] = sorted(msd)
    try:
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=os.path.join(folder, "dcp"))
        set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
        out["dcp"] = _restored(model, optim, saved)
    except BaseException as exc:  # noqa: BLE001 - the scenario reports what happened (CheckpointException)
        out.update(_failure(exc))
        out["dcp"] = None
        out["dcp_failure"] = _failure(exc)
    model, optim = _fresh(model_cls, order)
    old = torch.load(os.path.join(folder, "state.pt"), weights_only=False)
    try:
        set_model_state_dict(model, old["model"])
        set_optimizer_state_dict(model, optim, old["optim"])
        out["in_memory"] = _restored(model, optim, saved)
    except BaseException as exc:  # noqa: BLE001 - dcp raises CheckpointException, a BaseException
        out.update(_failure(exc))
        out["in_memory"] = None
        out["in_memory_failure"] = _failure(exc)
    out["report"] = _report()
    return out


def plain(folder: str) -> dict[str, Any]:
    model = model_class()()
    try:
        dcp.load({"model": get_model_state_dict(model)}, checkpoint_id=os.path.join(folder, "dcp"))
    except BaseException as exc:  # noqa: BLE001 - dcp raises CheckpointException, a BaseException
        return _failure(exc)
    return {"ok": True}


def ambiguous(folder: str) -> dict[str, Any]:
    """Two ``_orig_mod`` spellings of ``a.w`` (``a._orig_mod.w``, ``_orig_mod.a.w``): its load fails
    as torch's does. ``b.w`` is in the checkpoint next to ``b._orig_mod.w``: read as it is."""
    import torch.nn as nn

    def values(a1: float, a2: float, b: float, b_old: float) -> dict[str, torch.Tensor]:
        return {
            "a._orig_mod.w": torch.full((2,), a1),
            "_orig_mod.a.w": torch.full((2,), a2),
            "b.w": torch.full((2,), b),
            "b._orig_mod.w": torch.full((2,), b_old),
        }

    dcp.save(values(1.0, 2.0, 3.0, 4.0), checkpoint_id=os.path.join(folder, "dcp"))
    out: dict[str, Any] = {"ok": True}
    try:
        dcp.load({"a.w": torch.zeros(2)}, checkpoint_id=os.path.join(folder, "dcp"))
        out["dcp_a"] = "loaded"
    except BaseException as exc:  # noqa: BLE001 - dcp raises CheckpointException, a BaseException
        out["dcp_a"] = str(exc)
    b = {"b.w": torch.zeros(2)}
    dcp.load(b, checkpoint_id=os.path.join(folder, "dcp"))
    out["dcp_b"] = b["b.w"].tolist()

    model = nn.Module()
    model.a, model.b = nn.Module(), nn.Module()
    model.a.w, model.b.w = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2))
    try:
        set_model_state_dict(model, values(1.0, 2.0, 3.0, 4.0))
        out["set_strict"] = "loaded"
    except RuntimeError as exc:
        out["set_strict"] = str(exc)
    given = values(1.0, 2.0, 3.0, 4.0)
    incompatible = set_model_state_dict(model, given, options=StateDictOptions(strict=False))
    out["set_loose"] = {"a": model.a.w.tolist(), "b": model.b.w.tolist()}
    out["unexpected"] = sorted(incompatible.unexpected_keys)
    out["report"] = _report()
    return out


def user(_: str) -> dict[str, Any]:
    """A user's child module named ``_orig_mod`` (no compiler behind it), plain and behind a
    ``checkpoint_wrapper``, next to a real AC(compile) block: only the compiler's prefix goes."""
    import torch.nn as nn
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._orig_mod = nn.Linear(2, 2)

    model = nn.ModuleDict(
        {
            "mine": Holder(),
            "wrapped": checkpoint_wrapper(Holder()),
            "compiled": checkpoint_wrapper(torch.compile(Holder())),
        }
    )
    msd = get_model_state_dict(model)
    names = sorted(msd)
    set_model_state_dict(model, msd)  # strict: every key maps back to the module's own
    return {"ok": True, "model_keys": names, "report": _report()}


def _rank(rank: int, world: int, port: int, folder: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    result: dict[str, Any] = {"rank": rank, "ok": True}
    try:
        mesh = init_device_mesh("cpu", (world,))
        model_cls = model_class()
        torch.manual_seed(0)
        trained = model_cls()
        reference = {k: v.detach().clone() for k, v in trained.state_dict().items()}
        wrap(trained, "ac-compile")
        for layer in trained.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(trained, mesh=mesh)
        msd = get_model_state_dict(trained)
        result["keys"] = sorted(msd)
        dcp.save(msd, checkpoint_id=os.path.join(folder, "dcp"))
        torch.manual_seed(1)
        target = model_cls()
        for layer in target.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(target, mesh=mesh)
        tsd = get_model_state_dict(target)
        dcp.load(tsd, checkpoint_id=os.path.join(folder, "dcp"))
        set_model_state_dict(target, tsd)
        full = get_model_state_dict(target, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        result["restored"] = rank != 0 or all(torch.equal(full[k], v) for k, v in reference.items())
    except BaseException as exc:  # noqa: BLE001 - dcp raises CheckpointException, a BaseException
        result.update(_failure(exc))
    result["report"] = _report()
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def ranks(world: int) -> dict[str, Any]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_rank, args=(world, port, folder), nprocs=world, join=True)
        results = [json.load(open(os.path.join(folder, f"rank{r}.json"))) for r in range(world)]
    failed = [r for r in results if not r["ok"]]
    out = dict(failed[0] if failed else results[0])
    out["ok"] = not failed
    out["restored"] = all(r.get("restored") for r in results)
    return out


def main(argv: list[str]) -> None:
    name, args = argv[0], argv[1:]
    scenarios = {"keys": keys, "save": save, "load": load, "plain": plain, "user": user, "ambiguous": ambiguous}
    result = scenarios.get(name)
    out = result(*args) if result is not None else ranks(int(args[0]))
    out["torch"] = torch.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
