"""GPU memory shared through a file descriptor: CUDA's virtual memory API, over ctypes.

Why not torch's CUDA IPC: it exports a caching-allocator segment (which may hold other
tensors of the exporter), and the driver refused to map it in a process of another user
and namespaces with "mapping of buffer object failed" (one H100, 2026-11-25). Here the
judge creates each arena as a physical allocation of its own (`cuMemCreate`), exports it
as a POSIX file descriptor, and passes the descriptor over the runner's pipe (SCM_RIGHTS,
which works across users and namespaces); the runner imports and maps exactly that
allocation. Nothing else of the judge's memory is reachable through it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _Prop(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class CudaError(RuntimeError):
    pass


_lib: Any = None


def _cuda() -> Any:
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL("libcuda.so.1")
    return _lib


def _check(result: int, what: str) -> None:
    if result != 0:
        raise CudaError(f"{what} failed with CUDA driver error {result}")


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type = _PINNED
    prop.requestedHandleTypes = _POSIX_FD
    prop.location = _Location(_ON_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    value = ctypes.c_size_t()
    prop = _prop(device)
    _check(
        _cuda().cuMemGetAllocationGranularity(ctypes.byref(value), ctypes.byref(prop), 0),
        "cuMemGetAllocationGranularity",
    )
    return value.value


class Mapping:
    """A mapped allocation, as a uint8 tensor (`base`); unmapped and released by `release`."""

    def __init__(self, handle: int, size: int, device: int) -> None:
        self.handle, self.size, self.device = handle, size, device
        lib, ptr = _cuda(), ctypes.c_uint64()
        _check(
            lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), 0, 0, 0), "reserve"
        )
        self.ptr = ptr.value
        _check(
            lib.cuMemMap(
                ctypes.c_uint64(self.ptr), ctypes.c_size_t(size), 0, ctypes.c_uint64(handle), 0
            ),
            "map",
        )
        access = _Access(_Location(_ON_DEVICE, device), _READ_WRITE)
        _check(
            lib.cuMemSetAccess(
                ctypes.c_uint64(self.ptr), ctypes.c_size_t(size), ctypes.byref(access), 1
            ),
            "access",
        )
        self.base = torch.as_tensor(_Interface(self.ptr, size), device=torch.device("cuda", device))

    def export(self) -> int:
        """A new file descriptor for the allocation (the caller sends and closes it)."""
        fd = ctypes.c_int(-1)
        _check(
            _cuda().cuMemExportToShareableHandle(
                ctypes.byref(fd), ctypes.c_uint64(self.handle), _POSIX_FD, 0
            ),
            "cuMemExportToShareableHandle",
        )
        return fd.value

    def release(self) -> None:
        if self.ptr:
            torch.cuda.synchronize(self.device)
            lib = _cuda()
            lib.cuMemUnmap(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.size))
            lib.cuMemAddressFree(ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.size))
            lib.cuMemRelease(ctypes.c_uint64(self.handle))
            self.ptr = 0


def create(nbytes: int, device: int) -> Mapping:
    """A new allocation of at least `nbytes` on `device`, mapped here (the judge's side)."""
    torch.zeros(1, device=torch.device("cuda", device))  # the device's context exists
    step = granularity(device)
    size = -(-nbytes // step) * step
    handle, prop = ctypes.c_uint64(), _prop(device)
    _check(
        _cuda().cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), 0),
        "cuMemCreate",
    )
    return Mapping(handle.value, size, device)


def open_fd(fd: int, size: int, device: int) -> Mapping:
    """Map the allocation a judge exported as `fd` (the runner's side)."""
    torch.zeros(1, device=torch.device("cuda", device))  # the device's context exists
    handle = ctypes.c_uint64()
    _check(
        _cuda().cuMemImportFromShareableHandle(
            ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD
        ),
        "cuMemImportFromShareableHandle",
    )
    return Mapping(handle.value, size, device)


class _Interface:
    """What torch.as_tensor reads to wrap device memory it did not allocate (no copy)."""

    def __init__(self, ptr: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
        }
