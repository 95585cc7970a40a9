"""Suite-wide setup. App-level fixtures live in each folder's conftest.py."""

from __future__ import annotations

import os

# Every process this suite starts, rank processes included, inherits these: multicast
# must never be enabled on the shared GPU hosts where the GPU-marked tests run.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
