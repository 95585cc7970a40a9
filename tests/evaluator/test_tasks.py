"""run_evaluation with a recording `send`: the messages a host sends the portal."""

from __future__ import annotations

import dataclasses

from evaluator.contract import (
    FINISHED_TASK,
    PROGRESS_TASK,
    STARTED_TASK,
    EvaluationRequest,
    ProblemResult,
    ProblemStatus,
    progress_message,
    read_message,
)
from evaluator.host.profiles import get_profile
from evaluator.host.run import run_evaluation
from evaluator.host.settings import load_settings
from evaluator.host.tasks import HARD_TIME_LIMIT_S, HEARTBEAT_S, VISIBILITY_TIMEOUT_S, app
from tests.evaluator import samples
from tests.evaluator.archives import make_zip

SETTINGS = dataclasses.replace(
    load_settings({"PKB_SEED_SECRET": "test-secret-0123456789"}),
    trials=1,
    warmup=0,
    iters=2,
    problem_timeout_s=30,
)
PROFILE = dataclasses.replace(get_profile("cpu"), world_size=2)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    def __call__(self, task_name: str, message: dict) -> None:
        self.sent.append((task_name, message))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.sent]

    @property
    def finished(self) -> dict:
        name, message = self.sent[-1]
        assert name == FINISHED_TASK
        return read_message(message, "finished", ("outcome", "reason", "results"))


def request(bundle: bytes, **changes) -> dict:
    built = EvaluationRequest.build(
        evaluation_id="ev-1",
        submission_id=7,
        profile="cpu",
        bundle_name="b.zip",
        bundle=bundle,
        problems=["all-reduce"],
    ).to_json()
    return built | changes


def run(request_json) -> Recorder:
    send = Recorder()
    run_evaluation(
        request_json, settings=SETTINGS, send=send, profile=PROFILE, problems=samples.CATALOG
    )
    return send


def test_it_sends_started_progress_and_finished_in_order():
    send = run(request(make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN})))
    assert send.names == [STARTED_TASK, PROGRESS_TASK, PROGRESS_TASK, PROGRESS_TASK, FINISHED_TASK]
    assert send.sent[0][1]["evaluation_id"] == "ev-1" and send.sent[0][1]["host"]
    progress = [m for _, m in send.sent[1:4]]
    assert [(m["done"], m["phase"], m["current"]) for m in progress] == [
        (0, "compiling", ""),  # the compile pass, before the first problem
        (0, "judging", "all-reduce"),
        (1, "judging", ""),
    ]
    finished = send.finished
    assert finished["outcome"] == "done" and finished["environment"]["world_size"] == 2
    [result] = [ProblemResult.from_json(r) for r in finished["results"]]
    assert result.status == ProblemStatus.PASSED, result.message


def test_a_bad_contract_version_fails_with_the_reason():
    send = run(request(make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN}), version=99))
    assert send.names == [FINISHED_TASK]
    assert send.finished["outcome"] == "failed"
    assert send.finished["evaluation_id"] == "ev-1"
    assert "contract version 99 is not 1" in send.finished["reason"]


def test_a_request_that_is_not_an_object_fails():
    send = run(["not", "a", "request"])
    assert (
        send.finished["outcome"] == "failed" and "expected a JSON object" in send.finished["reason"]
    )


def test_a_corrupt_bundle_fails_with_the_bundle_message():
    send = run(request(b"this is no archive"))
    assert send.names == [STARTED_TASK, FINISHED_TASK]
    assert send.finished["outcome"] == "failed"
    assert send.finished["reason"] == "b.zip is not a .zip or .tar.gz archive"


def test_a_bundle_that_does_not_match_its_hash_fails():
    send = run(
        request(make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN}), bundle_sha256="0" * 64)
    )
    assert send.finished["reason"] == "bundle bytes do not match their sha256"


def test_a_request_for_another_profile_fails():
    send = run(request(make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN}), profile="h200x4"))
    assert send.finished["reason"] == "this host serves profile 'cpu', not 'h200x4'"


def test_the_celery_app_is_configured_for_long_gpu_tasks():
    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.task_soft_time_limit < conf.task_time_limit == HARD_TIME_LIMIT_S
    # Sized from the heartbeat, which renews a running task's deadline, not from the
    # longest evaluation: a killed worker's task is handed out again within a minute.
    assert conf.broker_transport_options["visibility_timeout"] == VISIBILITY_TIMEOUT_S == 60
    assert VISIBILITY_TIMEOUT_S >= 3 * HEARTBEAT_S
    assert conf.broker_transport_options["unacked_restore_interval"] == 5
    assert "evaluator.evaluate" in app.tasks
    assert any(step.__name__ == "KeepMessagesVisible" for step in app.steps["worker"])


def test_problems_missing_from_the_bundle_are_reported_not_run():
    bundle = make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN})
    send = run(request(bundle, problems=["ar-absent"]))
    [result] = send.finished["results"]
    assert result["status"] == "not_run" and send.finished["outcome"] == "done"


def test_each_result_goes_to_the_portal_as_soon_as_its_problem_is_judged():
    bundle = make_zip({"all-reduce.py": samples.ALL_REDUCE_PLAIN, "all-gather.py": samples.WRONG})
    send = run(request(bundle, problems=["all-reduce", "all-gather"]))
    progress = [m for name, m in send.sent if name == PROGRESS_TASK]
    # Before the second problem is judged, the first one's result is on its way.
    [second] = [m for m in progress if m["current"] == "all-gather"]
    first = ProblemResult.from_json(second["result"])
    assert (second["done"], first.slug, first.status) == (1, "all-reduce", ProblemStatus.PASSED)
    # The last one goes with the progress after it; then the finished message has both.
    last = ProblemResult.from_json(progress[-1]["result"])
    assert (progress[-1]["done"], last.slug) == (2, "all-gather")
    assert [r["slug"] for r in send.finished["results"]] == ["all-reduce", "all-gather"]
    assert send.finished["results"][0] == second["result"]
    assert sum("result" in m for m in progress) == 2  # each once, never in a heartbeat


def test_a_progress_message_without_the_new_fields_is_still_version_1():
    message = progress_message(evaluation_id="ev-1", done=0, total=1, current="")
    assert message == {"version": 1, "evaluation_id": "ev-1", "done": 0, "total": 1, "current": ""}
    assert read_message(message, "progress", ("done", "total", "current")) == message
