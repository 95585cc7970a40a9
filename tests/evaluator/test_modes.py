"""A submission's mode, through the host's task on real CPU ranks over gloo (world size 2):
test runs check the dev cases and time nothing, profile runs send traces and a summary
as artifacts, a profile of a hidden case is refused, ranked runs judge as before."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from evaluator.__main__ import zip_folder
from evaluator.contract import (
    FINISHED_TASK,
    EvaluationRequest,
    Mode,
    ProblemStatus,
    read_artifacts,
    read_message,
)
from evaluator.host.profiles import get_profile
from evaluator.host.run import run_evaluation
from evaluator.host.settings import load_settings
from evaluator.judge.modes import problem_run
from evaluator.judge.problem_run import ProblemRun
from problems.collective import all_reduce
from problems.registry import all_problems
from problems.spec import Case
from tests.evaluator import samples
from tests.evaluator.archives import make_zip

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SETTINGS = dataclasses.replace(
    load_settings({"PKB_SEED_SECRET": "modes-test-secret-0123456789"}),
    trials=1,
    warmup=1,
    iters=4,
    rounds=2,
    max_rounds=None,
    problem_timeout_s=60,
)
# A GPU host's profile (eval cases) on two CPU ranks: a test run takes the dev cases anyway.
EVAL_HOST = dataclasses.replace(get_profile("cpu"), world_size=2, case_kind="eval")
CPU_HOST = dataclasses.replace(get_profile("cpu"), world_size=2)
DEV_CASES = (Case("dev-a", "float32", {"n": 256}), Case("dev-b", "float32", {"n": 64}))
TWO_KINDS = dataclasses.replace(
    all_reduce.PROBLEM, dev_cases=DEV_CASES, eval_cases=(Case("eval-a", "float32", {"n": 512}),)
)
CATALOG = {"all-reduce": TWO_KINDS, "ar-wrong": samples.variant("ar-wrong")}
TIMES = ("time_us", "ref_time_us", "speedup", "speedup_low", "speedup_high", "roofline")


def evaluate(bundle: bytes, problems: list[str], *, host=CPU_HOST, catalog=None, **request):
    sent: list[tuple[str, dict]] = []
    built = EvaluationRequest.build(
        evaluation_id="modes-1",
        submission_id=7,
        profile="cpu",
        bundle_name="b.zip",
        bundle=bundle,
        problems=problems,
        **request,
    )
    run_evaluation(
        built.to_json(),
        settings=SETTINGS,
        send=lambda name, message: sent.append((name, message)),
        profile=host,
        problems=catalog,
    )
    name, message = sent[-1]
    assert name == FINISHED_TASK
    return read_message(message, "finished", ("outcome", "reason", "results"))


def test_a_test_run_checks_only_the_dev_cases_and_times_nothing():
    files = {"all-reduce.py": samples.ALL_REDUCE_PLAIN, "ar-wrong.py": samples.WRONG}
    finished = evaluate(
        make_zip(files), list(CATALOG), host=EVAL_HOST, catalog=CATALOG, mode=Mode.TEST
    )
    passed, wrong = finished["results"]
    assert passed["status"] == "passed", passed["message"]
    assert [c["case"] for c in passed["cases"]] == ["dev-a", "dev-b"]
    for result in (passed, wrong):
        assert all(result[name] is None for name in TIMES), result
        for case in result["cases"]:
            assert case["time_us"] is None and case["speedup"] is None
            assert case["rounds"] == [] and case["iterations"] == 0 and case["pairs"] == 0
    assert wrong["status"] == "wrong_answer"
    assert "artifacts" not in finished
    assert "peer_bandwidth_gbps" not in finished["environment"]


def test_a_profile_run_of_the_example_sends_valid_chrome_traces_and_a_summary():
    finished = evaluate(zip_folder(EXAMPLES / "pytorch"), ["all-reduce"], mode=Mode.PROFILE)
    (result,) = finished["results"]
    assert result["status"] == "passed", (result["message"], result["log"][-3000:])
    assert all(result[name] is None for name in TIMES)  # a profile's times are no score
    artifacts = {a.name: a for a in read_artifacts(finished.get("artifacts"))}
    assert set(artifacts) == {
        "all-reduce.rank0.trace.json",
        "all-reduce.rank1.trace.json",
        "all-reduce.summary.md",
        "all-reduce.summary.csv",
    }
    for rank in (0, 1):
        trace = artifacts[f"all-reduce.rank{rank}.trace.json"]
        assert trace.media_type == "application/json" and not trace.truncated
        events = json.loads(trace.data())["traceEvents"]
        calls = [e for e in events if e.get("name") == "pkb.solution"]
        assert len(calls) == 10 and all(e["ph"] == "X" for e in calls)
        assert any(e.get("cat") == "cpu_op" for e in events)
        assert trace.note.startswith(f"rank {rank}, case dev-bf16")  # the most bytes
    summary = artifacts["all-reduce.summary.md"].data().decode()
    assert summary.startswith("# Profile of all-reduce, case dev-bf16")
    assert "| your solution |" in summary and "| reference |" in summary
    assert "Top CPU operators by self time, rank 1" in summary
    assert "`gloo:all_gather`" in summary  # the example gathers, then sums
    table = artifacts["all-reduce.summary.csv"].data().decode().splitlines()
    assert table[0] == "rank,kind,name,calls,total_us,mean_us,communication"
    assert {row.split(",")[0] for row in table[1:]} == {"0", "1"}


def test_a_profile_of_a_case_that_is_no_dev_case_is_refused_before_anything_runs():
    bundle = make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN})
    catalog = {p.slug: p for p in all_problems()}
    for name in ("demo-1m", "no-such-case"):  # an eval case's name reads like any other
        finished = evaluate(
            bundle, ["all-reduce"], catalog=catalog, mode=Mode.PROFILE, profile_case=name
        )
        assert finished["outcome"] == "failed" and finished["results"] == []
        assert finished["reason"] == (
            f"profile case {name!r} is not a dev case of all-reduce (its dev cases: "
            "dev-fp32, dev-bf16): only dev cases are profiled, since a trace shows a "
            "case's inputs"
        )


def test_ranked_and_benchmark_runs_are_the_full_judging_as_before():
    fields = {"slug": "all-reduce", "problem": None, "solutions": {}, "pools": None}
    fields.update(profile=CPU_HOST, settings=SETTINGS, evaluation_id="x")
    assert type(problem_run(Mode.RANKED, **fields)) is ProblemRun
    assert type(problem_run(Mode.BENCHMARK, **fields)) is ProblemRun
    finished = evaluate(
        make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN}), ["all-reduce"], catalog=CATALOG
    )
    (result,) = finished["results"]
    assert result["status"] == ProblemStatus.PASSED
    assert result["time_us"] and result["ref_time_us"] and result["speedup"]
    for case in result["cases"]:
        assert case["pairs"] == 2 and len(case["rounds"]) == 2 and case["iterations"]
    assert "artifacts" not in finished
