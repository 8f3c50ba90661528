"""Persistent memo of "AOT is unsupported for this model and these inputs on this torch".

Every process start would otherwise pay the doomed AOT attempt again (Dynamo traces up to the
graph break, MagiCompiler PR #89 review). A memo entry is one small JSON file named by a SHA-256
key of:

* torch ``__version__`` and ``torch.version.git_version`` (a new torch retries AOT);
* the model's code: the bytes of the source file defining it, its qualified name and a digest of
  its code object (any edit to that file retries AOT);
* the inputs: for each pytree leaf of ``(args, kwargs)`` its type, and for tensors dtype, shape,
  stride, device type, ``requires_grad`` and, for DTensor, placements and mesh shape; the
  parameters/buffers (name, shape, dtype) of a module; the world size when ``torch.distributed``
  is initialized;
* the backend (name and config) and ``dynamic``.

Location: ``$TORCHINDUCTOR_CACHE_DIR/torchfix/aot-fallback`` (torch's default Inductor cache dir
when unset), or :func:`set_memo_dir`. Writes go to a temporary file in the same directory and are
published with ``os.replace``, so concurrent ranks writing the same key never expose a torn file;
a corrupt or unreadable entry counts as absent. ``TORCHFIX_AOT_FALLBACK_MEMO=0`` disables reads
and writes. Hazard: a model whose behaviour depends on code in *other* files (helpers it calls) is
keyed only on its own file; a change there keeps the memo until torch or that file changes
(:func:`clear_memo` or the env switch resets it).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import itertools
import json
import os
import sys
import tempfile
import time
import types
from typing import Any

FORMAT = 1
_dir_override: str | None = None


def set_memo_dir(path: str | None) -> None:
    """Put the memo under ``path`` (``None``: back to the Inductor cache dir)."""
    global _dir_override
    _dir_override = path


def memo_dir() -> str:
    """Directory holding the memo entries (not created until the first write)."""
    if _dir_override:
        return _dir_override
    base = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not base:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir

            base = default_cache_dir()
        except Exception:  # noqa: BLE001 - any layout problem: a private default
            base = os.path.join(tempfile.gettempdir(), "torchfix")
    return os.path.join(base, "torchfix", "aot-fallback")


def _code_digest(code: types.CodeType, h: Any, depth: int = 0) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    h.update(repr(code.co_varnames).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and depth < 8:
            _code_digest(const, h, depth + 1)
        else:
            h.update(repr(const).encode())


_file_digests: dict[tuple[str, float, int], str] = {}


def _file_digest(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "no-file"
    key = (path, st.st_mtime, st.st_size)
    cached = _file_digests.get(key)
    if cached is None:
        with open(path, "rb") as f:
            cached = hashlib.sha256(f.read()).hexdigest()
        _file_digests[key] = cached
    return cached


def _source_part(model: Any) -> list[str]:
    target = model
    module_obj: Any = None
    if isinstance(model, types.MethodType):
        module_obj = model.__self__
        target = model.__func__
    elif not isinstance(model, types.FunctionType) and hasattr(type(model), "forward"):
        module_obj = model
        target = type(model).forward
    target = inspect.unwrap(target)
    parts = [getattr(target, "__module__", "?") or "?", getattr(target, "__qualname__", type(target).__qualname__)]
    code = getattr(target, "__code__", None)
    if isinstance(code, types.CodeType):
        h = hashlib.sha256()
        _code_digest(code, h)
        parts += [code.co_filename, _file_digest(code.co_filename), h.hexdigest()]
    if module_obj is not None:
        parts.append(type(module_obj).__qualname__)
        import torch

        if isinstance(module_obj, torch.nn.Module):
            tensors = itertools.chain(module_obj.named_parameters(), module_obj.named_buffers())
            parts += [f"{n}:{tuple(t.shape)}:{t.dtype}" for n, t in tensors if isinstance(t, torch.Tensor)]
    return parts


def _leaf(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        desc = f"{type(x).__name__}:{x.dtype}:{tuple(x.shape)}:{x.device.type}:{x.requires_grad}"
        if not getattr(x, "is_nested", False) and x.layout == torch.strided:
            desc += f":{tuple(x.stride())}"
        placements = getattr(x, "placements", None)
        mesh = getattr(x, "device_mesh", None)
        if placements is not None:
            desc += f":{placements!r}:{tuple(getattr(mesh, 'shape', ()))}"
            local = getattr(x, "_local_tensor", None)
            if isinstance(local, torch.Tensor):
                desc += f":local{tuple(local.shape)}"
        return desc
    if x is None or isinstance(x, (bool, int, float, str)):
        return f"{type(x).__name__}:{x!r}"
    return type(x).__qualname__


def _backend_part(backend: Any) -> str:
    if isinstance(backend, str):
        return backend
    name = getattr(backend, "compiler_name", None) or getattr(backend, "__qualname__", None)
    config = getattr(backend, "config", None)
    return (
        f"{getattr(backend, '__module__', '')}.{name or type(backend).__qualname__}:{sorted((config or {}).items())!r}"
    )


def key(model: Any, example_inputs: Any, backend: Any, dynamic: Any) -> str:
    """SHA-256 hex key of (torch, model code, inputs, backend, dynamic); see the module docstring."""
    import torch
    from torch.utils._pytree import tree_leaves

    parts: list[str] = [f"format={FORMAT}", str(torch.__version__), str(getattr(torch.version, "git_version", ""))]
    parts += _source_part(model)
    parts += [_leaf(x) for x in tree_leaves(example_inputs)]
    parts += [_backend_part(backend), f"dynamic={dynamic!r}"]
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        parts.append(f"world={dist.get_world_size()}")
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _path(k: str) -> str:
    return os.path.join(memo_dir(), f"{k}.json")


def lookup(k: str) -> dict[str, Any] | None:
    """The entry for ``k`` or None (absent, unreadable, corrupt or another format)."""
    try:
        with open(_path(k), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return None
    return entry


def record(k: str, cause: str, where: str) -> bool:
    """Atomically write the entry for ``k``; returns False (and writes nothing) on any OS error."""
    import torch

    entry = {"format": FORMAT, "cause": cause, "where": where, "torch": str(torch.__version__), "time": time.time()}
    directory = memo_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f)
            os.replace(tmp, _path(k))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def clear_memo() -> int:
    """Delete every memo entry; returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(memo_dir())
    except OSError:
        return 0
    for name in names:
        if name.endswith(".json"):
            try:
                os.unlink(os.path.join(memo_dir(), name))
                removed += 1
            except OSError:
                pass
    return removed
