"""A profile run on CUDA ranks: kernels in the traces, a top-kernel table by device time.

One rank on a host of one GPU, two where there are more (`pytest -m gpu tests/gpu`).
With PKB_PROFILE_OUT=<folder> the artifacts are written there too, for
docs/measurements/ (open a trace in https://ui.perfetto.dev).
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

import pytest
import torch

from evaluator.__main__ import zip_folder
from evaluator.contract import Mode, ProblemStatus, read_artifacts
from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from problems.registry import all_problems

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS < 1, reason="needs CUDA GPUs")]
WORLD = min(GPUS, 2)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Every problem at one rank too: a host of one GPU profiles what one rank can show.
# Eval cases by default: a profile run takes a dev case anyway.
HOST = HardwareProfile("gpu-profile", "test", "-", WORLD, backend="nccl", case_kind="eval")
CATALOG = {p.slug: dataclasses.replace(p, world_sizes=(1, 2, 4, 8)) for p in all_problems()}


def _profile(folder: Path, slugs: list[str]) -> tuple[dict, dict]:
    bundle = read_bundle("bundle.zip", zip_folder(folder), known_slugs=CATALOG)
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "gpu-profile-secret-0123456789"}),
        trials=1,
        warmup=2,
        problem_timeout_s=240,  # a cold build of a CUDA extension takes about a minute
    )
    artifacts: list = []
    results, _ = evaluate_bundle(
        bundle,
        slugs=slugs,
        profile=HardwareProfile(
            "gpu-profile", "test", "-", WORLD, backend="nccl", case_kind="eval"
        ),
        settings=settings,
        evaluation_id=str(uuid.uuid4()),
        problems=CATALOG,
        mode=Mode.PROFILE,
        on_artifact=artifacts.append,
    )
    checked = read_artifacts([a.to_json() for a in artifacts])
    _keep(checked)
    return {r.slug: r for r in results}, {a.name: a for a in checked}


def _keep(artifacts: list) -> None:
    out = os.environ.get("PKB_PROFILE_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        for artifact in artifacts:
            (Path(out) / artifact.name).write_bytes(artifact.data())


@pytest.mark.parametrize(
    "example, slug, kernel",
    [
        ("cuda", "broadcast", "copy16"),  # the example's own kernel
        # NCCL's kernels; one rank's all-gather may be a plain copy, no kernel of NCCL's.
        ("pytorch", "all-reduce", "nccl" if WORLD > 1 else ""),
    ],
)
def test_a_profile_run_shows_the_kernels_of_each_rank(example, slug, kernel):
    results, artifacts = _profile(EXAMPLES / example, [slug])
    result = results[slug]
    assert result.status == ProblemStatus.PASSED, (result.message, result.log[-3000:])
    assert result.time_us is None and result.speedup is None
    summary = artifacts[f"{slug}.summary.md"].data().decode()
    for rank in range(WORLD):
        trace = json.loads(artifacts[f"{slug}.rank{rank}.trace.json"].data())
        kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
        assert kernels, f"rank {rank}: no CUDA activity in the trace"
        marks = [e for e in trace["traceEvents"] if e.get("name") == "pkb.solution"]
        assert sum(e.get("cat") == "user_annotation" for e in marks) == 10
        assert f"## Top kernels by device time, rank {rank}" in summary
        assert f"| {rank} |" in summary and "| 10 | rank" in summary  # 10 calls marked
    assert kernel in summary, summary
    table = artifacts[f"{slug}.summary.csv"].data().decode()
    assert ",kernel," in table
    print(f"\n{summary}")
