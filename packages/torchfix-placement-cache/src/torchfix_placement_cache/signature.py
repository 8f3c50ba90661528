"""``input_signature``: a placement-aware, process-stable key of a compiled graph's example inputs.

For frameworks that keep their own artifact caches (a compiled-artifact directory keyed on source
and config, like MagiCompiler before its PR #89): an artifact is valid only for the input layout it
was compiled for, so the key must also cover the inputs. Switching FSDP ``fully_shard`` to
``replicate`` changes the placements, uneven sharding changes the local shape of one rank, and
neither shows in ``graph.code``: the Dynamo graph of a DTensor function is identical for ``Shard(0)``,
``Replicate()``, ``Shard(1)`` and 2-D meshes. So the graph code is never a substitute for this key,
and this key never reads it (the caller hashes source/config itself).

What goes in, per input (in order):

* ``DTensor``: dtype; placements (``repr``: ``Shard(dim=0)``, ``Replicate()``, ``Partial(sum)``,
  ``_StridedShard(...)``); mesh shape, dim names and device type; global shape and stride; local
  shape and stride (covers uneven sharding: the rank's shard size); ``requires_grad``. With
  ``include_rank=True`` also the rank's mesh coordinate and the mesh's global rank list (for
  artifacts that bake the rank in, e.g. compiled with ``compile_on_one_rank`` off and caches
  shared by several meshes).
* plain tensor: dtype, shape, stride, device type (not the index: a cache shared by the GPUs of
  one host should hit; pass ``include_rank=True`` for rank-specific artifacts), ``requires_grad``.
* other tensor subclasses: type name, outer dtype/shape/stride/``requires_grad``, the stable part
  of their ``__tensor_flatten__`` metadata and every inner tensor (recursively).
* ``int`` / ``float`` / ``bool`` / ``str`` / ``None``: type and value; ``SymInt``: its expression;
  anything else: its type name only.

The result is ``sha256`` over a canonical JSON rendering: no ``hash()`` (``PYTHONHASHSEED``), no
object ids, no storage addresses, so every process on every host computes the same string for the
same layout. Works on real, fake and meta tensors (a backend's example inputs are fake).

Hazard: the mesh rank list is excluded by default, so two meshes of the same shape on different
ranks (e.g. two pipeline stages) share a key; collectives resolve their group at run time, but pass
``include_rank=True`` if your artifact captures group names.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from torchfix_placement_cache._layout import dim, dims

SIGNATURE_VERSION = 1


def _stable(obj: Any, depth: int = 0) -> Any:
    """JSON-able, process-stable rendering of subclass metadata; unknown objects -> type name."""
    if depth > 8:
        return "..."
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, (tuple, list)):
        return [_stable(x, depth + 1) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _stable(v, depth + 1) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    import torch

    if isinstance(obj, (torch.dtype, torch.device, torch.Size)):
        return str(obj)
    if isinstance(obj, torch.SymInt):
        return dim(obj)
    return f"<{type(obj).__module__}.{type(obj).__qualname__}>"


def _tensor_core(t: Any) -> dict[str, Any]:
    return {
        "dtype": str(t.dtype),
        "shape": list(dims(t.shape)),
        "stride": list(dims(t.stride())),
        "requires_grad": bool(t.requires_grad),
    }


def _describe_dtensor(t: Any, include_rank: bool) -> dict[str, Any]:
    mesh = t.device_mesh
    local = t._local_tensor
    desc: dict[str, Any] = {
        "kind": "dtensor",
        "dtype": str(t.dtype),
        "placements": [repr(p) for p in t.placements],
        "mesh_shape": list(dims(mesh.shape)),
        "mesh_dim_names": list(mesh.mesh_dim_names) if mesh.mesh_dim_names is not None else None,
        "mesh_device_type": str(mesh.device_type),
        "global_shape": list(dims(t.shape)),
        "global_stride": list(dims(t.stride())),
        "local_shape": list(dims(local.shape)),
        "local_stride": list(dims(local.stride())),
        "requires_grad": bool(t.requires_grad),
    }
    if include_rank:
        coordinate = mesh.get_coordinate()
        desc["mesh_coordinate"] = list(coordinate) if coordinate is not None else None
        desc["mesh_ranks"] = [int(r) for r in mesh.mesh.flatten().tolist()]
    return desc


def _dtensor_class() -> Any:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed support
        return None
    return DTensor


def describe_input(value: Any, *, include_rank: bool = False) -> Any:
    """The JSON-able description of one input that :func:`input_signature` hashes."""
    import torch

    if isinstance(value, torch.Tensor):
        from torch.utils._python_dispatch import is_traceable_wrapper_subclass

        dtensor_cls = _dtensor_class()
        if dtensor_cls is not None and isinstance(value, dtensor_cls):
            return _describe_dtensor(value, include_rank)
        desc = _tensor_core(value)
        if not is_traceable_wrapper_subclass(value):
            # plain, Parameter and FakeTensor inputs describe the same layout
            desc.update(kind="tensor", device_type=value.device.type)
            if include_rank and value.device.index is not None:
                desc["device_index"] = value.device.index
            return desc
        inner_names, meta = value.__tensor_flatten__()
        desc.update(
            kind=f"{type(value).__module__}.{type(value).__qualname__}",
            meta=_stable(meta),
            inner={name: describe_input(getattr(value, name), include_rank=include_rank) for name in inner_names},
        )
        return desc
    if isinstance(value, torch.SymInt):
        return {"kind": "symint", "expr": dim(value)}
    if value is None or isinstance(value, (bool, int, str)):
        return {"kind": type(value).__name__, "value": value}
    if isinstance(value, float):
        return {"kind": "float", "value": repr(value)}
    if isinstance(value, (tuple, list)):
        return {"kind": type(value).__name__, "items": [describe_input(v, include_rank=include_rank) for v in value]}
    return {"kind": f"{type(value).__module__}.{type(value).__qualname__}"}


def input_signature(example_inputs: Sequence[Any], *, include_rank: bool = False) -> str:
    """Return a stable hex key (sha256, 64 chars) of the layout of ``example_inputs``.

    Two calls give the same string, in any process on any host, exactly when every input has the
    same description (see the module doc): same dtype, placements, mesh shape / dim names / device
    type, global and local shape and stride, ``requires_grad`` for DTensors; same dtype, shape,
    stride, device type, ``requires_grad`` for plain tensors. ``include_rank=True`` adds the mesh
    coordinate and rank list of DTensors and the device index of plain tensors, for artifacts that
    are only valid on one rank. Combine it with your own source/config hash; never hash
    ``graph.code`` instead (it is identical across placements).

    Imports torch (and ``torch.distributed.tensor``) when called.
    """
    payload = {
        "v": SIGNATURE_VERSION,
        "include_rank": include_rank,
        "inputs": [describe_input(x, include_rank=include_rank) for x in example_inputs],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
