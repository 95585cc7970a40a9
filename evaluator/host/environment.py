"""What a result was measured on: the environment fingerprint sent with every evaluation.

Nothing here may fail an evaluation: a driver or topology that cannot be read is left out.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import torch

from evaluator.host.profiles import HardwareProfile

NVIDIA_SMI_TIMEOUT_S = 20.0


def environment_fingerprint(profile: HardwareProfile) -> dict[str, Any]:
    env: dict[str, Any] = {
        "evaluator": evaluator_version(),
        "hostname": socket.gethostname(),
        "backend": profile.backend,
        "world_size": profile.world_size,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model(),
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["gpu_count"] = torch.cuda.device_count()
        env["cuda"] = torch.version.cuda
        with contextlib.suppress(Exception):
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        driver = driver_version()
        if driver:
            env["driver"] = driver
        topology = link_topology()
        if topology:
            env["topology"] = topology
    return env


@functools.cache
def evaluator_version() -> str:
    """The package's version and a digest of the evaluator's own sources, "0.1.0+3f2a9c1e0b7d":
    what a re-run needs to judge with the same code (the problems' code has its own version,
    Problem.version). A digest, not a git commit: hosts run images without the repository."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    try:
        version = importlib.metadata.version("pkb")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return f"{version}+{digest.hexdigest()[:12]}"


@functools.cache
def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@functools.cache
def driver_version() -> str | None:
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    output = _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
    lines = (output or "").split()
    return lines[0] if lines else None


@functools.cache
def link_topology() -> str | None:
    """ "GPU0-GPU1: NV18, ..." from `nvidia-smi topo -m`, else CUDA's peer-access matrix."""
    output = _nvidia_smi("topo", "-m")
    if output:
        parsed = parse_topology(output)
        if parsed:
            return parsed
    with contextlib.suppress(Exception):
        count = torch.cuda.device_count()
        pairs = [
            f"GPU{i}-GPU{j}: {'peer' if torch.cuda.can_device_access_peer(i, j) else 'no peer'}"
            for i in range(count)
            for j in range(i + 1, count)
        ]
        return ", ".join(pairs) or None
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_topology(text: str) -> str:
    """The GPU-to-GPU links of an `nvidia-smi topo -m` matrix, one "GPUi-GPUj: LINK" a pair."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header = next((line.split() for line in lines if line.split()[:1] == ["GPU0"]), None)
    if header is None:
        return ""
    gpus = [name for name in header if re.fullmatch(r"GPU\d+", name)]
    rows = {
        cells[0]: cells[1:]
        for cells in (line.split() for line in lines)
        if cells and cells[0] in gpus and len(cells) > len(gpus)
    }
    pairs = []
    for i, a in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            if a in rows:
                pairs.append(f"{a}-{gpus[j]}: {rows[a][j]}")
    return ", ".join(pairs)


def _nvidia_smi(*args: str) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    with contextlib.suppress(Exception):
        done = subprocess.run(
            [exe, *args],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0:
            return done.stdout
    return None
