"""Shape/stride normalisation shared by the cache-key patch and :func:`input_signature`.

Sizes and strides may be symbolic (``SymInt``) when a graph is compiled with dynamic shapes. They
are rendered the way torch's own FX graph cache pickler renders a ``SymInt`` (``str(expr)``), so a
key never depends on ``hash()`` (``PYTHONHASHSEED``) or on object identity.
"""

from __future__ import annotations

from typing import Any, Iterable


def dim(value: Any) -> int | str:
    """A size or stride as a plain ``int``, or the ``str`` of its symbolic expression."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "maybe_as_int"):
        as_int = node.maybe_as_int()
        if as_int is not None:
            return int(as_int)
    return str(value)


def dims(values: Iterable[Any]) -> tuple[int | str, ...]:
    """:func:`dim` of every element."""
    return tuple(dim(v) for v in values)


def local_layout(local_tensor: Any) -> tuple[tuple[int | str, ...], tuple[int | str, ...]]:
    """``(shape, stride)`` of a DTensor's local shard (a real, fake or meta tensor)."""
    return dims(local_tensor.shape), dims(local_tensor.stride())
