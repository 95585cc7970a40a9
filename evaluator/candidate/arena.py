"""The shared arena: one block of memory that a judge owns and one runner maps.

What crosses the trust boundary is described here as data. A tensor in the arena is a
`Slot` (byte offset, dtype name, shape): contiguous, aligned, never anything else, so a
description read from a runner can be checked against the arena's bounds before the judge
touches a byte. A round lays the arena out as the inputs of its calls, then room for their
outputs (`layout`), and the judge alone decides that layout.

The judge imports this module for the format; a runner imports it to map the arena
(`open_cpu`, `open_cuda`: from a file descriptor the judge passed over the pipe).
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

ALIGN = 256  # bytes: every slot starts here, whatever its dtype (CUDA's widest vector load)
MAX_DIMS = 8

# The dtypes a slot may have: outputs of another dtype are not a problem's outputs.
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "complex64",
        "complex128",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
    )
    if hasattr(torch, name)
}
NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in DTYPES.items()}


class LayoutError(ValueError):
    """A description that is not a slot of this arena."""


def aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


@dataclass(frozen=True)
class Slot:
    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPES[self.dtype].itemsize

    @property
    def end(self) -> int:
        return self.offset + self.nbytes

    def to_json(self) -> list[Any]:
        return [self.offset, self.dtype, list(self.shape)]

    @classmethod
    def from_json(cls, data: Any, *, limit: int) -> Slot:
        """A slot from data someone else wrote, checked to lie within `limit` bytes."""
        if not (isinstance(data, (list, tuple)) and len(data) == 3):
            raise LayoutError(f"not a slot: {str(data)[:80]}")
        offset, dtype, shape = data
        slot = cls(_index(offset), _dtype_name(dtype), _shape(shape))
        if slot.offset % ALIGN or slot.end > limit:
            raise LayoutError(f"a slot outside the arena: {slot.to_json()}")
        return slot


def _index(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise LayoutError(f"not an offset: {str(value)[:40]}")
    return value


def _dtype_name(value: Any) -> str:
    if not (isinstance(value, str) and value in DTYPES):
        raise LayoutError(f"not a dtype of a problem's outputs: {str(value)[:40]}")
    return value


def _shape(value: Any) -> tuple[int, ...]:
    if not (isinstance(value, (list, tuple)) and len(value) <= MAX_DIMS):
        raise LayoutError(f"not a shape: {str(value)[:80]}")
    return tuple(_index(d) for d in value)


def pack(items: Sequence[tuple[str, Sequence[int]]], start: int) -> tuple[list[Slot], int]:
    """Slots for (dtype, shape) items laid one after the other from `start`; the end."""
    slots, at = [], aligned(start)
    for dtype, shape in items:
        slot = Slot(at, dtype, tuple(shape))
        slots.append(slot)
        at = aligned(slot.end)
    return slots, at


def view(base: torch.Tensor, slot: Slot) -> torch.Tensor:
    """The slot as a tensor over the arena's bytes (no copy)."""
    raw = base[slot.offset : slot.end]
    return raw.view(DTYPES[slot.dtype]).view(slot.shape)


def describe(value: Any) -> tuple[str, list[tuple[str, list[int]]]] | None:
    """(kind, [(dtype, shape)]) of an output that may go into slots, else None.

    Only a plain strided Tensor of a known dtype, or a plain tuple or list of them (what
    `torch.topk` returns included), has slots: anything else is not a problem's output."""
    if type(value) is torch.Tensor:
        item = _item(value)
        return ("tensor", [item]) if item else None
    if type(value) in (tuple, list) or type(value) in RETURN_TYPES:
        items = [_item(x) if type(x) is torch.Tensor else None for x in value]
        if all(items):
            kind = "list" if type(value) is list else "tuple"
            return kind, [i for i in items if i]
    return None


def _item(t: torch.Tensor) -> tuple[str, list[int]] | None:
    if t.layout != torch.strided or t.is_meta or t.dtype not in NAMES:
        return None
    return NAMES[t.dtype], list(t.shape)


# What torch.topk, torch.max(dim=...) and friends return: C tuples, taken at import, before
# bundle code runs (a class of its own could claim their module name).
RETURN_TYPES = frozenset(
    t for t in vars(torch.return_types).values() if isinstance(t, type) and issubclass(t, tuple)
)


def call_layout(
    inputs: Mapping[str, Any], start: int
) -> tuple[dict[str, Any], list[torch.Tensor], int]:
    """Where a call's inputs go: {name: ["slot", Slot json] or ["value", v]}, the tensors
    in slot order, and the end."""
    names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
    items = [(NAMES[inputs[k].dtype], list(inputs[k].shape)) for k in names]
    slots, end = pack(items, start)
    layout: dict[str, Any] = {k: ["value", v] for k, v in inputs.items() if k not in names}
    layout.update({k: ["slot", s.to_json()] for k, s in zip(names, slots, strict=True)})
    return layout, [inputs[k] for k in names], end


def call_inputs(base: torch.Tensor, layout: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a call, as views of the arena (runner side)."""
    limit = base.numel()
    return {
        name: view(base, Slot.from_json(value, limit=limit)) if kind == "slot" else value
        for name, (kind, value) in layout.items()
    }


# --- mapping an arena ------------------------------------------------------------------


def open_cpu(fd: int, size: int) -> tuple[torch.Tensor, CpuMapping]:
    """A CPU arena from the memfd its judge passed over the pipe (the fd is closed).

    Mapped with libc's mmap, not Python's: `mmap.mmap` keeps a duplicate of the descriptor
    for the mapping's life, and a sibling rank (the same user, the same pid namespace)
    reopened it through /proc/<pid>/fd and read this rank's inputs (a red team did:
    tests/redteam/test_review_attacks.py). This mapping holds no descriptor."""
    try:
        mapping = CpuMapping(fd, size)
    finally:
        os.close(fd)
    return torch.frombuffer(mapping.buffer, dtype=torch.uint8), mapping


class CpuMapping:
    """A shared mapping of `size` bytes of `fd`, by address only. Never unmapped: a view
    bundle code kept of an arena the judge replaced (it grew; rare) reads the old bytes
    rather than faulting, as with Python's mmap, which a live view keeps open."""

    def __init__(self, fd: int, size: int) -> None:
        prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED
        addr = _libc().mmap(None, size, prot, flags, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            error = ctypes.get_errno()
            raise OSError(error, f"mapping the arena failed: {os.strerror(error)}")
        self.buffer = (ctypes.c_uint8 * size).from_address(addr)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]  # fmt: skip
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def open_cuda(fd: int, size: int, device: int) -> Any:
    """A CUDA arena from the allocation its judge exported as `fd` (the fd is closed)."""
    from evaluator.candidate import vmm

    try:
        return vmm.open_fd(fd, size, device)
    finally:
        os.close(fd)
