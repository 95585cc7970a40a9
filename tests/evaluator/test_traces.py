"""A profile run's traces read on the trusted side: hostile bytes never get past as
anything but a TraceError, and what is kept is valid Chrome trace JSON within its cap."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from evaluator.judge import traces
from evaluator.judge.profile_report import Profiled, markdown, table
from evaluator.judge.profiling import ProfileCaseError, case_to_profile, trace_cap
from problems.collective import all_reduce
from problems.spec import Case


def event(name, ts, dur, *, cat="cpu_op", tid=1, ph="X"):
    return {"ph": ph, "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 7, "tid": tid}


def encoded(events, **meta) -> bytes:
    return json.dumps({"traceEvents": events, **meta}).encode()


# A CPU rank's trace: a call holding an all-reduce (gloo's work on its own thread) and a
# clone whose copy is its child.
CPU_EVENTS = [
    event("pkb.solution", 0, 100, cat="user_annotation"),
    event("aten::clone", 1, 30),
    event("aten::copy_", 5, 20),
    event("c10d::allreduce_", 40, 50),
    event("gloo:all_reduce", 41, 45, cat="user_annotation", tid=2),
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "main"}},
]


def test_a_cpu_trace_is_summarised_by_self_time():
    summary = traces.summarize(traces.parse_trace(encoded(CPU_EVENTS)))
    rows = {row.name: (row.calls, row.total_us) for row in summary.rows}
    assert not summary.device and summary.calls == 1
    assert rows == {
        "aten::clone": (1, 10.0),  # 30 less its copy's 20
        "aten::copy_": (1, 20.0),
        "c10d::allreduce_": (1, 50.0),
        "gloo:all_reduce": (1, 45.0),
    }
    assert summary.communication_us == 95.0 and summary.compute_us == 30.0


def test_a_gpu_trace_is_summarised_by_kernel_device_time():
    events = [
        *CPU_EVENTS,
        event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50, 40, cat="kernel"),
        event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 150, 42, cat="kernel"),
        event("void at::native::vectorized_elementwise_kernel<4>", 10, 5, cat="kernel"),
        event("Memcpy DtoD (Device -> Device)", 20, 3, cat="gpu_memcpy"),
        event("cudaLaunchKernel", 9, 4, cat="cuda_runtime"),
        event("void c10d::symmetric_memory::one_shot_all_reduce_kernel", 300, 8, cat="kernel"),
        event("_my_allgather_kernel", 400, 6, cat="kernel"),
        event("pkb.solution", 0, 100, cat="gpu_user_annotation"),  # the mark, on the device
    ]
    summary = traces.summarize(traces.parse_trace(encoded(events)))
    assert summary.device and summary.calls == 1
    assert [(r.name, r.calls) for r in summary.rows[:1]] == [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2)
    ]
    assert "cudaLaunchKernel" not in {r.name for r in summary.rows}
    assert summary.communication_us == 40 + 42 + 8 + 6
    assert summary.compute_us == 5 + 3


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x00\xffgarbage{", "not valid JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "nests too deeply"),
        (b'{"traceEvents": [{"ts": NaN}]}', "not valid JSON"),
        (b'{"traceEvents": [{"ts": 1e999}]}', "not valid JSON"),
        (b'{"traceEvents": [' + b"9" * 5000 + b"]}", "not valid JSON"),
        (b'{"traceEvents": {"not": "a list"}}', "no list of traceEvents"),
        (b'"just a string"', "no list of traceEvents"),
        (b"[" + b"0," * traces.MAX_VALUES + b"0]", "JSON values"),
    ],
)
def test_hostile_bytes_are_refused_as_a_trace_error(data, why):
    with pytest.raises(traces.TraceError, match=why):
        traces.parse_trace(data)


def test_events_it_cannot_read_are_skipped_by_the_summary_and_kept_in_the_trace():
    odd = [
        event("huge", 1, 10**4000),  # an integer no float holds
        event("negative", 1, -5),
        {"ph": "X", "name": ["not", "a", "string"], "ts": 1, "dur": 1},
        {"ph": "X", "name": "no times"},
        "not an object",
        event("fine", 1, 2),
    ]
    trace = traces.parse_trace(encoded(odd))
    assert [row.name for row in traces.summarize(trace).rows] == ["fine"]
    data, dropped = traces.fit_trace(trace, 1 << 20, "rank 0.")
    assert dropped == 0 and len(json.loads(data)["traceEvents"]) == 5


def test_a_trace_over_its_cap_loses_its_latest_events_and_stays_valid_json():
    events = [event(f"op{i}", i * 10, 5) for i in range(5000)] + CPU_EVENTS[-1:]
    trace = traces.parse_trace(encoded(events, schemaVersion=1, traceName="/scratch/x.json"))
    data, dropped = traces.fit_trace(trace, 64 * 1024, "rank 0.")
    loaded = json.loads(data)
    assert len(data) <= 64 * 1024 and dropped > 0
    kept = loaded["traceEvents"]
    assert kept[0]["ph"] == "M"  # metadata first, then the earliest events
    assert [e["name"] for e in kept[1:4]] == ["op0", "op1", "op2"]
    assert len(kept) + dropped == len(events)
    assert f"{dropped} events left out" in loaded["otherData"]["pkb"]
    assert loaded["schemaVersion"] == 1 and "traceName" not in loaded


def test_a_cap_too_small_for_the_frame_keeps_nothing():
    trace = traces.parse_trace(encoded(CPU_EVENTS))
    assert traces.fit_trace(trace, 10, "rank 0.") == (b"", len(CPU_EVENTS))


def test_it_never_reads_through_a_link_a_fifo_or_past_the_cap(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_bytes(encoded(CPU_EVENTS))
    (tmp_path / "link.json").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "big.json").write_bytes(b" " * 101)
    (tmp_path / "empty.json").write_bytes(b"")
    for name, why in [
        ("link.json", "no trace file"),
        ("fifo.json", "not a plain file"),
        ("missing.json", "no trace file"),
        ("empty.json", "wrote no trace"),
    ]:
        with pytest.raises(traces.TraceError, match=why):
            traces.read_trace(tmp_path / name)
    with pytest.raises(traces.TraceError, match="over"):
        traces.read_trace(tmp_path / "big.json", cap=100)
    assert traces.read_trace(secret) == secret.read_bytes()


def test_names_from_a_trace_are_tamed_in_the_summary():
    names = ['=HYPERLINK("http://evil")', "a|b\nc\x1b[31m`x`", "k" * 500]
    trace = traces.parse_trace(encoded([event(n, 0, 1, cat="kernel") for n in names]))
    profiled = Profiled(
        slug="all-reduce",
        case=Case("dev-fp32", "float32", {"n": 1000}),
        world_size=1,
        backend="nccl",
        calls=10,
        bytes_moved=0,
        bandwidth_gbps=None,
        times=(1e-3, 1e-3, 1e-4, 10),
        summaries={0: traces.summarize(trace)},
    )
    text = markdown(profiled)
    assert "\x1b" not in text and "a/b c?[31m'x'" in text and "k" * 118 not in text
    rows = list(csv.DictReader(io.StringIO(table(profiled).decode())))
    assert {row["name"][:11] for row in rows} >= {"'=HYPERLINK", "a/b c?[31m`"}


def test_the_profiled_case_is_a_dev_case_named_or_the_one_moving_most_bytes():
    problem = all_reduce.PROBLEM
    assert case_to_profile(problem, "", world_size=4).name == "dev-bf16"  # 4096 elements
    assert case_to_profile(problem, "dev-fp32", world_size=4).name == "dev-fp32"
    for name in ("demo-1m", "nonexistent"):
        with pytest.raises(ProfileCaseError, match="only dev cases are profiled") as refused:
            case_to_profile(problem, name, world_size=4)
        assert "its dev cases: dev-fp32, dev-bf16" in str(refused.value)


def test_every_trace_and_summary_fits_the_messages_cap_together():
    for problems, world_size in [(1, 1), (1, 8), (8, 8), (97, 8)]:
        total = problems * (world_size * trace_cap(problems, world_size) + 64 * 1024)
        assert total <= 24 * 1024 * 1024
    assert trace_cap(1, 2) == 8 * 1024 * 1024
