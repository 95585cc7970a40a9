"""The environment fingerprint's parts that can be checked without a GPU."""

from __future__ import annotations

from evaluator.__main__ import _table
from evaluator.contract import ProblemResult, ProblemStatus
from evaluator.host.environment import parse_topology

TOPO_2 = """\
\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNV18\t0-47\t0\t\tN/A
GPU1\tNV18\t X \t0-47\t0\t\tN/A

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""

TOPO_3_WITH_NIC = """\
        GPU0    GPU1    GPU2    NIC0    CPU Affinity    NUMA Affinity
GPU0     X      NV18    SYS     PIX     0-31    0
GPU1    NV18     X      NV18    SYS     0-31    0
GPU2    SYS     NV18     X      SYS     32-63   1
NIC0    PIX     SYS     SYS      X
"""


def test_it_reads_the_links_between_gpus_from_nvidia_smi_topo():
    assert parse_topology(TOPO_2) == "GPU0-GPU1: NV18"
    assert parse_topology(TOPO_3_WITH_NIC) == ("GPU0-GPU1: NV18, GPU0-GPU2: SYS, GPU1-GPU2: NV18")


def test_it_reads_nothing_from_output_it_does_not_understand():
    assert parse_topology("") == ""
    assert parse_topology("Failed to initialize NVML: Driver/library version mismatch") == ""


def test_check_shows_the_roofline_and_the_flags():
    result = ProblemResult(
        slug="all-reduce",
        status=ProblemStatus.PASSED,
        world_size=2,
        time_us=10.0,
        ref_time_us=20.0,
        speedup=2.0,
        roofline=1.25,
        flags=["below_floor"],
    )
    header, row = _table([result]).splitlines()
    assert "roofline" in header
    assert "passed [below_floor]" in row and "125%" in row


def test_check_shows_the_speedup_with_its_interval():
    result = ProblemResult(
        slug="all-reduce",
        status=ProblemStatus.PASSED,
        world_size=2,
        speedup=1.84,
        speedup_low=1.80,
        speedup_high=1.88,
    )
    assert "1.84x (1.80-1.88)" in _table([result]).splitlines()[1]
