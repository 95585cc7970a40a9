"""What every problem declares: metadata, reference, inputs, tolerance and byte model.

A problem module builds one `Problem` named `PROBLEM`. Everything else (launching ranks,
seeding, comparing, timing) belongs to the evaluator; a problem reads like its paper
description.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch


class Category(enum.StrEnum):
    COLLECTIVE = "collective"
    TENSOR = "tensor"
    SEQUENCE = "sequence"
    CONTEXT = "context"
    PIPELINE = "pipeline"
    DATA = "data"
    EXPERT = "expert"
    FSDP = "fsdp"
    VOCAB = "vocab"
    GRAPH = "graph"
    GEOMETRIC = "geometric"
    OTHER = "other"

    @property
    def label(self) -> str:
        return CATEGORY_LABELS[self]


CATEGORY_LABELS = {
    Category.COLLECTIVE: "Collective primitives",
    Category.TENSOR: "Tensor parallel",
    Category.SEQUENCE: "Sequence parallel",
    Category.CONTEXT: "Context parallel",
    Category.PIPELINE: "Pipeline parallel",
    Category.DATA: "Data parallel",
    Category.EXPERT: "Expert parallel",
    Category.FSDP: "FSDP / ZeRO",
    Category.VOCAB: "Vocab parallel",
    Category.GRAPH: "Graph",
    Category.GEOMETRIC: "Geometric / spatial",
    Category.OTHER: "Other",
}

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int32": torch.int32,
    "int64": torch.int64,
}


@dataclass(frozen=True)
class Tolerance:
    """Element passes when |actual - expected| <= atol + rtol * |expected| (NaN never)."""

    atol: float
    rtol: float


# Moving data must not change it: copies are compared bit for bit.
EXACT: Mapping[str, Tolerance] = {}

# Sums of W addends in another order differ by up to W-1 roundings of the partial sums.
# bf16 keeps 8 significant bits, so at W = 8 with unit-variance inputs a few elements out
# of millions differ by ~0.1; a missing or doubled rank's contribution is off by ~1.
SUMS_OVER_RANKS: Mapping[str, Tolerance] = {
    "float32": Tolerance(atol=1e-5, rtol=1e-5),
    "float16": Tolerance(atol=1e-2, rtol=1e-3),
    "bfloat16": Tolerance(atol=0.125, rtol=2e-2),
}


@dataclass(frozen=True)
class Case:
    """One input configuration. `params` are the problem's own sizes (e.g. {"n": 4096})."""

    name: str
    dtype: str
    params: Mapping[str, int] = field(default_factory=dict)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype].itemsize

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Case:
        return cls(name=str(data["name"]), dtype=str(data["dtype"]), params=dict(data["params"]))


class InputContext:
    """Where and how one rank draws its inputs for one trial.

    `shared=True` draws the same numbers on every rank (weights, the root of a broadcast);
    the default draws numbers of this rank alone. Both streams come from the trial seed,
    which the evaluator derives from a secret and changes every trial.
    """

    def __init__(
        self, *, rank: int, world_size: int, dtype: str, device: torch.device | str, seed: int
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.dtype_name = dtype
        self.dtype = DTYPES[dtype]
        self.device = torch.device(device)
        self.seed = seed
        self._rank_gen = self._generator(seed * 1_000_003 + rank + 1)
        self._shared_gen = self._generator(seed)

    def _generator(self, seed: int) -> torch.Generator:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed & 0x7FFF_FFFF_FFFF_FFFF)
        return gen

    def gen(self, *, shared: bool = False) -> torch.Generator:
        return self._shared_gen if shared else self._rank_gen

    def randn(self, *shape: int, shared: bool = False, dtype: torch.dtype | None = None):
        # Drawn in float32 and cast, so every dtype sees the same distribution.
        out = torch.randn(shape, generator=self.gen(shared=shared), device=self.device)
        return out.to(dtype or self.dtype)

    def randint(self, low: int, high: int, *shape: int, shared: bool = False):
        return torch.randint(
            low,
            high,
            shape,
            generator=self.gen(shared=shared),
            device=self.device,
            dtype=torch.int64,
        )

    def choice(self, n: int) -> int:
        """A value in [0, n) that every rank agrees on (e.g. a root rank)."""
        return int(self.randint(0, n, 1, shared=True).item())


Reference = Callable[..., Any]
InputMaker = Callable[[Case, InputContext], dict[str, Any]]
ByteModel = Callable[[Case, int], int]


# Shared by every problem; a change here is a change of the harness, not of a problem.
_FRAMEWORK = {"problems", "problems.spec", "problems.registry"}


def _sources(reference: Reference) -> list[str]:
    """The source of the reference's module and of the catalog modules it uses."""
    module = inspect.getmodule(reference)
    if module is None:
        return [inspect.getsource(reference)]
    sources, seen = [inspect.getsource(module)], {module.__name__}
    for value in vars(module).values():
        used = value if inspect.ismodule(value) else inspect.getmodule(value)
        name = getattr(used, "__name__", "")
        if used and name.startswith("problems.") and name not in seen | _FRAMEWORK:
            seen.add(name)
            sources.append(inspect.getsource(used))
    return sources


@dataclass(frozen=True)
class Problem:
    """A reference `solution(...)` and everything needed to judge a replacement of it.

    bytes_moved(case, world_size) is the fewest bytes one rank must send over the links
    for the case: the roofline's numerator.
    """

    slug: str
    title: str
    category: Category
    description: str
    reference: Reference
    make_inputs: InputMaker
    bytes_moved: ByteModel
    dev_cases: tuple[Case, ...]
    # The repository's eval cases are a labelled demo set; production hosts read the hidden
    # ones from a private file (evaluator settings).
    eval_cases: tuple[Case, ...]
    world_sizes: tuple[int, ...] = (2, 4, 8)
    # dtype -> tolerance; a dtype absent here (integers, and everything for EXACT) is
    # compared exactly.
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)

    @property
    def dtypes(self) -> tuple[str, ...]:
        seen = dict.fromkeys(c.dtype for c in (*self.dev_cases, *self.eval_cases))
        return tuple(seen)

    @property
    def signature(self) -> str:
        # Annotations are strings under `from __future__ import annotations`; show them bare.
        return f"solution{inspect.signature(self.reference)}".replace("'", "")

    @property
    def reference_source(self) -> str:
        """The whole module: a reference may call helpers of its own module, and the
        input generator and byte model are part of what a kernel author reads."""
        module = inspect.getmodule(self.reference)
        return inspect.getsource(module) if module else inspect.getsource(self.reference)

    @property
    def version(self) -> str:
        """Changes when the behaviour that judging depends on changes: the problem's module,
        the catalog's helper modules it uses (e.g. problems/tensor/_gemm.py) and its
        tolerances."""
        digest = hashlib.sha256()
        for source in _sources(self.reference):
            digest.update(source.encode())
        digest.update(repr(sorted(self.tolerances.items())).encode())
        return digest.hexdigest()[:12]

    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype, Tolerance(atol=0.0, rtol=0.0))

    def is_exact(self, dtype: str) -> bool:
        tol = self.tolerance(dtype)
        return tol.atol == 0.0 and tol.rtol == 0.0

    def cases(self, kind: str) -> tuple[Case, ...]:
        if kind == "dev":
            return self.dev_cases
        if kind == "eval":
            return self.eval_cases
        raise ValueError(f"unknown case kind {kind!r}; expected 'dev' or 'eval'")
