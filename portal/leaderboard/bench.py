"""Leaderboard latency at scale: 1,000 teams, 97 problems, 50,000 results.

    .venv/bin/python -m portal.leaderboard.bench     # SQLite: var/bench-leaderboard.sqlite3
    .venv/bin/python -m portal.leaderboard.bench --database-url postgres://localhost/pkb_bench

Seeds a database of its own (never the site's: the one named is created if missing and
emptied first), then requests the leaderboard page through Django's test client and prints
the median and p95 latency of the whole request (view, queries, template), for the overall
board and one category: memoised (the usual case), rebuilt on every request (what a
process's first look pays, and at most a look that comes while its board is being rebuilt)
and recorded: after each recorded result (a passed result's numbers written again and
committed, which marks its team's kept rows: portal/leaderboard/kept.py), the time until the
process's watcher has rebuilt the board ("fresh after"), then a look at it. The problems
list is measured the same way.
Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = f"sqlite:///{ROOT / 'var' / 'bench-leaderboard.sqlite3'}"
PROFILE = "h200x4"


def _configure(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["PKB_DEBUG"] = "0"  # DEBUG would record every query and slow the page
    os.environ.setdefault("PKB_SECRET_KEY", "bench-only-" + "x" * 40)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    if database_url.startswith("postgres"):
        _create_postgres_database(database_url)
    import django

    django.setup()


def _create_postgres_database(url: str) -> None:
    import dj_database_url
    import psycopg

    db = dj_database_url.parse(url)
    conninfo = {
        "host": db["HOST"] or None,
        "port": db["PORT"] or None,
        "user": db["USER"] or None,
        "password": db["PASSWORD"] or None,
    }
    with psycopg.connect(dbname="postgres", autocommit=True, **conninfo) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]]
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{db["NAME"]}"')


def _seed(*, teams: int, problems: int, results: int, seed: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from portal.accounts.models import Membership, Team
    from portal.problems.models import Category, Problem
    from portal.submissions.models import ProblemResult, Submission

    if Team.objects.exclude(slug__startswith="bench-team-").exists():
        sys.exit("this database holds teams the benchmark did not make: name a database of its own")
    rng = random.Random(seed)
    user_model = get_user_model()
    per_submission = 10
    submissions = math.ceil(results / per_submission)
    t0 = timezone.now() - timedelta(days=30)
    with transaction.atomic():
        ProblemResult.objects.all().delete()
        Submission.objects.all().delete()
        Membership.objects.all().delete()
        Team.objects.all().delete()
        user_model.objects.filter(username__startswith="bench-").delete()
        Problem.objects.all().delete()
        categories = list(Category)
        catalog = Problem.objects.bulk_create(
            Problem(
                slug=f"bench-problem-{i}",
                title=f"Bench problem {i}",
                category=categories[i % len(categories)],
                weight=2.0 if i % 15 == 0 else 1.0,
            )
            for i in range(problems)
        )
        team_rows = Team.objects.bulk_create(
            Team(name=f"Bench team {i}", slug=f"bench-team-{i}", invite_code=f"bench-{i}")
            for i in range(teams)
        )
        users = user_model.objects.bulk_create(
            user_model(username=f"bench-{i}", password="!") for i in range(teams)
        )
        Membership.objects.bulk_create(
            Membership(user=u, team=t, role=Membership.Role.OWNER)
            for u, t in zip(users, team_rows, strict=True)
        )
        subs = Submission.objects.bulk_create(
            Submission(
                team=team_rows[i % teams],
                user=users[i % teams],
                bundle=f"bench/{i}.zip",
                bundle_name="bench.zip",
                bundle_sha256="0" * 64,
                profile=PROFILE,
                problems=[],
                status=Submission.Status.DONE,
                finished_at=t0 + timedelta(minutes=i),
            )
            for i in range(submissions)
        )
        rows = []
        for sub in subs:
            for problem in rng.sample(catalog, per_submission):
                passed = rng.random() < 0.8
                speedup = math.exp(rng.gauss(0.1, 0.6)) if passed else None
                rows.append(
                    ProblemResult(
                        submission=sub,
                        problem=problem,
                        status="passed" if passed else "wrong_answer",
                        world_size=4,
                        time_us=100.0 / speedup if speedup else None,
                        ref_time_us=100.0,
                        speedup=speedup,
                        roofline=min(rng.random(), 0.95) if passed else None,
                        flags=["below_floor"] if passed and rng.random() < 0.01 else [],
                    )
                )
                if len(rows) == results:
                    break
            if len(rows) == results:
                break
        ProblemResult.objects.bulk_create(rows, batch_size=5000)
    # Table statistics, as autovacuum (PostgreSQL) or a periodic ANALYZE would have them;
    # without, the planner guesses one row per table and joins in nested loops.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


_sent_at: list[float] = []


def _response_sent(**_) -> None:
    _sent_at.append(time.perf_counter())


def _measure(
    client, url: str, key: tuple, *, requests: int, mode: str
) -> tuple[list[float], list[float]]:
    """Each request's time (ms), and in mode "recorded" how long after each change its
    board was fresh again (ms)."""
    from django.db.models import F

    from portal.leaderboard import freshness
    from portal.submissions.models import ProblemResult

    passed = list(ProblemResult.objects.passed().values_list("id", flat=True)[:1000])
    rng = random.Random(url)
    timings, fresh_after = [], []
    for _ in range(requests):
        if mode == "rebuilt":
            freshness.forget()
        elif mode == "recorded":
            # A committed change (autocommit), as a recorded result is; the watcher hears of
            # it at the commit and rebuilds the board, which a later look then finds ready.
            changed = time.perf_counter()
            result = ProblemResult.objects.filter(pk=rng.choice(passed))
            result.update(speedup=F("speedup"))  # moves the version, marks its team
            if not freshness.wait_until_fresh(key):
                sys.exit(f"{url}: the board was not rebuilt after a change")
            fresh_after.append((time.perf_counter() - changed) * 1000)
        start = time.perf_counter()
        response = client.get(url, HTTP_HOST="localhost")
        timings.append((_sent_at[-1] - start) * 1000)
        if response.status_code != 200:
            sys.exit(f"{url}: HTTP {response.status_code}")
    return timings, fresh_after


def _engine(connection) -> str:
    if connection.vendor == "postgresql":
        major, minor = divmod(connection.pg_version, 10000)
        return f"PostgreSQL {major}.{minor}"
    if connection.vendor == "sqlite":
        return f"SQLite {connection.Database.sqlite_version}"
    return connection.vendor


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default=os.environ.get("PKB_BENCH_DATABASE_URL", DEFAULT_URL)
    )
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--problems", type=int, default=97)
    parser.add_argument("--results", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--cold-requests", type=int, default=20)
    parser.add_argument("--no-seed", action="store_true", help="reuse what the last run seeded")
    args = parser.parse_args(argv)

    if args.database_url.startswith("sqlite"):
        (ROOT / "var").mkdir(exist_ok=True)
    _configure(args.database_url)
    from django.core.management import call_command
    from django.core.signals import request_finished
    from django.db import connection
    from django.test import Client

    from portal.leaderboard import freshness, kept
    from portal.leaderboard.selectors.board import board_key
    from portal.submissions.models import ProblemResult

    call_command("migrate", verbosity=0)
    # As in production (DEBUG off): static files come from the manifest.
    call_command("collectstatic", interactive=False, verbosity=0)
    if not args.no_seed:
        start = time.perf_counter()
        _seed(teams=args.teams, problems=args.problems, results=args.results, seed=1)
        print(f"seeded in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    kept.refresh()  # after a bulk load every group is marked: all computed once
    print(f"kept rows computed in {time.perf_counter() - start:.1f} s")
    print(f"engine: {_engine(connection)} · {ProblemResult.objects.count()} results · {PROFILE}")
    # A request's time ends where a server has sent the response: at `request_finished`,
    # before the test client's own bookkeeping and before a rebuild thread starts (its
    # receiver is connected later, when the first request imports the leaderboard).
    request_finished.connect(_response_sent)
    client = Client()
    for label, url, key in (
        ("overall", f"/?profile={PROFILE}", board_key(PROFILE)),
        ("category tensor", f"/?profile={PROFILE}&category=tensor", board_key(PROFILE, "tensor")),
        ("problems list", f"/problems/?profile={PROFILE}", ("problem-list", PROFILE)),
    ):
        for mode, n in (
            ("memoised", args.requests),
            ("rebuilt", args.cold_requests),
            ("recorded", args.cold_requests),
        ):
            _measure(client, url, key, requests=3, mode=mode)  # warm-up
            timings, fresh_after = _measure(client, url, key, requests=n, mode=mode)
            print(
                f"{label:16} {mode:9} n={n:<4} median {statistics.median(timings):7.1f} ms"
                f"   p95 {_p95(timings):7.1f} ms"
                + (
                    f"   fresh after: median {statistics.median(fresh_after):6.1f} ms"
                    f"   p95 {_p95(fresh_after):6.1f} ms"
                    if fresh_after
                    else ""
                )
            )
    freshness.stop_watcher()


if __name__ == "__main__":
    main()
