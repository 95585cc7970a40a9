"""Faults injected into a running site: workers SIGKILLed, the broker killed and started
again, a cancel in the middle of an evaluation. Real Celery workers, a real Redis of the
test's own, real gloo ranks; the counts come from the database and the workers' logs.

The workers run with short liveness intervals (faults.FAST); that the defaults recover a
killed host within 2 minutes is arithmetic on the settings, checked here too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from portal.accounts.services import team_create
from portal.problems.services import problems_sync
from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import submission_cancel, submission_create
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import noted_pid_running, reachable_folder
from tests.integration.faults import OwnRedis, Workers, publishing_to, received, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
WORLD_SIZE = 4  # the cpu profile's

# The example's all-reduce, behind a gate: every rank of the first attempt notes its pid
# and waits in the solution (to be killed there), later attempts solve at once.
ONCE_THEN_SOLVES = """
import os
import time
import torch.distributed as dist

NOTES = {notes!r}


def solution(x):
    mark = os.path.join(NOTES, f"first-{{dist.get_rank()}}")
    if not os.path.exists(mark):
        with open(mark, "w") as f:
            f.write(f"{{os.getpid()}} {{os.readlink('/proc/self/ns/pid')}}")
        time.sleep(600)
    world_size = dist.get_world_size()
    gathered = x.new_empty(world_size * x.numel())
    dist.all_gather_into_tensor(gathered, x)
    return gathered.view(world_size, -1).float().sum(0).to(x.dtype)
"""

# Every rank notes its pid and waits until the test says go, then solves.
WAITS_FOR_GO = """
import os
import time
import torch.distributed as dist

NOTES = {notes!r}


def solution(x):
    mark = os.path.join(NOTES, f"waiting-{{dist.get_rank()}}")
    if not os.path.exists(mark):
        with open(mark, "w") as f:
            f.write(f"{{os.getpid()}} {{os.readlink('/proc/self/ns/pid')}}")
    while not os.path.exists(os.path.join(NOTES, "go")):
        time.sleep(0.05)
    world_size = dist.get_world_size()
    gathered = x.new_empty(world_size * x.numel())
    dist.all_gather_into_tensor(gathered, x)
    return gathered.view(world_size, -1).float().sum(0).to(x.dtype)
"""

SLEEPS_FOREVER = """
import os
import time
import torch.distributed as dist

NOTES = {notes!r}


def solution(x):
    with open(os.path.join(NOTES, f"sleeping-{{dist.get_rank()}}"), "w") as f:
        f.write(f"{{os.getpid()}} {{os.readlink('/proc/self/ns/pid')}}")
    time.sleep(600)
"""


def example(slug: str) -> str:
    return (EXAMPLE / f"{slug}.py").read_text()


@pytest.fixture
def own_redis(tmp_path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def notes() -> Iterator[Path]:
    # Bundle code (the candidate user, when the tests run as root) writes here.
    with reachable_folder("recovery", candidates_write=True) as folder:
        yield folder


@pytest.fixture
def site(own_redis, settings) -> Iterator[None]:
    """The portal of this process talks to the test's own Redis, with its catalog."""
    # Celery's configuration reads Django's settings: switch it first, so that it goes
    # back to the suite's broker afterwards.
    with publishing_to(own_redis.url):
        settings.CELERY_BROKER_URL = own_redis.url
        settings.PKB_MAX_ACTIVE_SUBMISSIONS = 5
        problems_sync()
        yield


@pytest.fixture
def workers(own_redis, tmp_path, site, notes) -> Iterator[Callable[..., Workers]]:
    made: list[Workers] = []

    def make(**env: str) -> Workers:
        # Bundle code writes its notes where the test reads them, through the sandbox.
        env = {"PKB_SANDBOX_SHARED": str(notes), **env}
        made.append(Workers(tmp_path, own_redis.url, env))
        return made[-1]

    yield make
    for group in made:
        group.stop_all()


@pytest.fixture
def alice(db):
    user = get_user_model().objects.create_user("alice", password="x-very-secret-1")
    team_create(owner=user, name="Alice's Kernels")
    return user


def submit(user, files: dict[str, str]) -> Submission:
    upload = SimpleUploadedFile("bundle.zip", make_zip(files), content_type="application/zip")
    return submission_create(user=user, upload=upload)


def noted_pids(notes: Path, prefix: str) -> list[tuple[int, str]]:
    """Each rank's pid and pid namespace, as it noted them (a pid inside a sandbox is its
    namespace's: two hosts' sandboxes may reuse one)."""
    found = []
    for path in notes.glob(f"{prefix}-*"):
        if text := path.read_text():
            pid, namespace = text.split(" ", 1)
            found.append((int(pid), namespace))
    return found


def all_ranks_noted(notes: Path, prefix: str) -> list[tuple[int, str]] | None:
    pids = noted_pids(notes, prefix)
    return pids if len(pids) == WORLD_SIZE else None


def finished(submission: Submission) -> Callable[[], Submission | None]:
    def check() -> Submission | None:
        fresh = Submission.objects.get(pk=submission.pk)
        return None if fresh.is_active else fresh

    return check


def results_by_problem(submission: Submission) -> dict[str, list[str]]:
    rows = ProblemResult.objects.filter(submission=submission).select_related("problem")
    found: dict[str, list[str]] = {}
    for row in rows:
        found.setdefault(row.problem.slug, []).append(row.status)
    return found


def received_at(log: str, evaluation_id: str) -> datetime:
    """When the worker took the attempt, from its log line (local time, like now())."""
    line = re.search(
        rf"^\[([0-9-]+ [0-9:]+),(\d+): INFO/MainProcess\] Task evaluator\.evaluate"
        rf"\[{re.escape(evaluation_id)}\] received",
        log,
        re.MULTILINE,
    )
    assert line, f"the worker never took {evaluation_id}"
    moment = datetime.strptime(line.group(1), "%Y-%m-%d %H:%M:%S")
    return moment.replace(microsecond=int(line.group(2)) * 1000)


def test_the_defaults_requeue_a_killed_hosts_work_within_two_minutes():
    # The last heartbeat may come up to one interval before the kill; the sweeper sees the
    # silence PKB_STUCK_AFTER_S later, at its next run at the latest.
    s = django_settings
    assert s.PKB_HEARTBEAT_S + s.PKB_STUCK_AFTER_S + s.PKB_SWEEP_INTERVAL_S <= 120
    # The broker's own path: the message comes back after the visibility timeout.
    assert s.PKB_HEARTBEAT_S + s.PKB_VISIBILITY_TIMEOUT_S + 5 <= 120


def test_an_evaluator_killed_mid_evaluation_is_recovered_with_one_result_per_problem(
    workers, alice, notes
):
    site = workers()
    site.portal()
    site.evaluator("host-a")
    submission = submit(
        alice,
        {
            "all-gather.py": example("all-gather"),
            "all-reduce.py": ONCE_THEN_SOLVES.format(notes=str(notes)),
        },
    )
    pids = wait_for(
        lambda: all_ranks_noted(notes, "first"), 120, "the ranks to be in all-reduce", site.logs
    )
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.RUNNING
    site.kill("host-a")
    killed_at = datetime.now()
    site.evaluator("host-b")

    done = wait_for(finished(submission), 240, "the submission to be judged again", site.logs)
    assert done.status == Submission.Status.DONE, done.reason
    assert results_by_problem(done) == {"all-gather": ["passed"], "all-reduce": ["passed"]}
    # host-a's ranks died with it (each asked the kernel to kill it when its parent dies).
    wait_for(lambda: not any(noted_pid_running(*p) for p in pids), 10, "host-a's ranks to be gone")
    # Recovered: host-b took the attempt that was judged, by the sweeper's requeue (heartbeat
    # + stuck + sweep = 6 s here) or by Redis handing the message out again (visibility +
    # restore check = 9 s), whichever came first; host-b's own start-up counts too.
    taken_at = received_at(site.log("host-b"), str(done.evaluation_id))
    recovered_s = (taken_at - killed_at).total_seconds()
    assert 0 < recovered_s < 60, f"host-b took it {recovered_s:.0f} s after the kill"


def test_a_broker_restart_loses_no_submission_and_judges_none_twice(
    workers, alice, notes, own_redis
):
    # A longer stall limit: the workers take a few seconds to reconnect, and a running
    # evaluation's heartbeats wait for them.
    site = workers(PKB_STUCK_AFTER_S="20")
    site.portal()
    site.evaluator()
    running = submit(alice, {"all-reduce.py": WAITS_FOR_GO.format(notes=str(notes))})
    wait_for(
        lambda: all_ranks_noted(notes, "waiting"), 120, "the first evaluation to run", site.logs
    )
    # One queued request is enough to lose (each more costs an evaluation of test time).
    queued = [submit(alice, {"all-reduce.py": example("all-reduce")})]
    broker = own_redis.client()
    wait_for(lambda: broker.llen("eval.cpu") == 1, 10, "the request in the queue")

    own_redis.kill()  # without persistence: the queue is gone
    own_redis.start()
    assert broker.llen("eval.cpu") == 0
    (notes / "go").touch()

    everyone = [running, *queued]
    for submission in everyone:
        wait_for(finished(submission), 170, f"submission {submission.pk} to finish", site.logs)
    for submission in Submission.objects.filter(pk__in=[s.pk for s in everyone]):
        assert submission.status == Submission.Status.DONE, submission.reason
        assert results_by_problem(submission) == {"all-reduce": ["passed"]}
        assert submission.attempts == 1
        assert received(site.log("evaluator"), str(submission.evaluation_id)) == 1


def test_a_portal_worker_killed_while_recording_records_on_restart_without_a_rerun(workers, alice):
    # Hold the results table: the portal worker records the submission's new status, then
    # waits to insert the results, inside its transaction, and is killed right there.
    db = connection.settings_dict
    if connection.vendor != "postgresql":  # the lock below is PostgreSQL's
        pytest.skip("holds a PostgreSQL table lock: set DATABASE_URL=postgres://... (CI does)")
    holder = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
    )
    holder.execute('LOCK TABLE "submissions_problemresult" IN EXCLUSIVE MODE')
    watcher = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
        autocommit=True,
    )

    def recording_blocked() -> bool:
        rows = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE 'INSERT INTO \"submissions_problemresult\"%%'"
        ).fetchone()
        return bool(rows and rows[0])

    site = workers()
    site.portal("portal-1")
    site.evaluator()
    try:
        submission = submit(alice, {"all-reduce.py": example("all-reduce")})
        wait_for(recording_blocked, 120, "the portal worker to be recording", site.logs)
        site.kill("portal-1")
    finally:
        holder.rollback()
        holder.close()
    site.portal("portal-2")
    done = wait_for(finished(submission), 60, "the result to be recorded", site.logs)
    watcher.close()

    assert done.status == Submission.Status.DONE, done.reason
    assert results_by_problem(done) == {"all-reduce": ["passed"]}
    assert done.attempts == 1
    assert received(site.log("evaluator"), str(done.evaluation_id)) == 1


def test_a_cancel_during_an_evaluation_stops_its_ranks_within_ten_seconds(
    workers, alice, notes, own_redis
):
    site = workers()
    site.portal()
    site.evaluator()
    submission = submit(alice, {"all-reduce.py": SLEEPS_FOREVER.format(notes=str(notes))})
    pids = wait_for(
        lambda: all_ranks_noted(notes, "sleeping"), 120, "the ranks to be running", site.logs
    )
    assert all(noted_pid_running(*pid) for pid in pids)
    # Meanwhile the host keeps its message's visibility deadline fresh (and sends
    # heartbeats), so the short visibility timeout never hands a running task out again.
    broker, since = own_redis.client(), time.time()
    wait_for(
        lambda: any(s > since for _, s in broker.zrange("unacked_index", 0, -1, withscores=True)),
        10,
        "the host to renew its message's visibility",
    )
    heartbeat = Submission.objects.get(pk=submission.pk).heartbeat_at
    wait_for(
        lambda: Submission.objects.get(pk=submission.pk).heartbeat_at > heartbeat,
        10,
        "a heartbeat while the ranks sleep",
    )

    assert submission_cancel(submission=Submission.objects.get(pk=submission.pk))
    wait_for(
        lambda: not any(noted_pid_running(*p) for p in pids), 10, "the ranks to be gone", site.logs
    )
    # The host stopped without a result, and is free for the next submission.
    wait_for(lambda: "stopped: cancelled" in site.log("evaluator"), 10, "the host to stop")
    after = Submission.objects.get(pk=submission.pk)
    assert after.status == Submission.Status.CANCELLED
    assert not ProblemResult.objects.filter(submission=after).exists()
