"""What the portal asks of hosts and teams: liveness of evaluator hosts, per-team quotas of
each mode, model and agent entries' quotas, re-runs for the ranking."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from portal.settings.env import envbool, envint

# Liveness (docs/recovery.md). An evaluator host sends a heartbeat every PKB_HEARTBEAT_S
# while it evaluates (the evaluator reads the same variable); the sweeper runs every
# PKB_SWEEP_INTERVAL_S and requeues a running evaluation silent for PKB_STUCK_AFTER_S, up
# to PKB_MAX_ATTEMPTS attempts in all. A killed host's work is therefore queued again
# within heartbeat + stuck + sweep = 10 + 60 + 15 s by default (the issue asks for 2 min).
# Redis hands an unacknowledged message out again after PKB_VISIBILITY_TIMEOUT_S; the
# evaluator keeps its running message's deadline fresh on every heartbeat, so the timeout
# is sized from the heartbeat, not from the longest evaluation.
PKB_HEARTBEAT_S = envint("PKB_HEARTBEAT_S", 10)
PKB_STUCK_AFTER_S = envint("PKB_STUCK_AFTER_S", 60)
PKB_SWEEP_INTERVAL_S = envint("PKB_SWEEP_INTERVAL_S", 15)
PKB_VISIBILITY_TIMEOUT_S = envint("PKB_VISIBILITY_TIMEOUT_S", 60)
PKB_MAX_ATTEMPTS = envint("PKB_MAX_ATTEMPTS", 3)
# A submission whose hardware profile has no worker says so on its page, and fails with
# that reason once it has waited this long with no such worker seen.
PKB_NO_WORKER_WAIT_S = envint("PKB_NO_WORKER_WAIT_S", 3600)
if min(PKB_HEARTBEAT_S, PKB_SWEEP_INTERVAL_S, PKB_MAX_ATTEMPTS, PKB_NO_WORKER_WAIT_S) <= 0:
    raise ImproperlyConfigured(
        "PKB_HEARTBEAT_S, PKB_SWEEP_INTERVAL_S, PKB_MAX_ATTEMPTS and PKB_NO_WORKER_WAIT_S "
        "must be positive"
    )
# Two heartbeats may be late (a busy portal queue) before a live host looks dead.
if PKB_STUCK_AFTER_S < 3 * PKB_HEARTBEAT_S or PKB_VISIBILITY_TIMEOUT_S < 3 * PKB_HEARTBEAT_S:
    raise ImproperlyConfigured(
        "PKB_STUCK_AFTER_S and PKB_VISIBILITY_TIMEOUT_S must be at least 3 x PKB_HEARTBEAT_S"
    )

# Per team, so that one team cannot fill the GPU queue: runs of each mode in the last hour
# and the last 24 hours (0 per hour: no hourly limit), and submissions queued or running at
# once, all modes together (web form, API and pkb alike; portal/submissions/quotas.py).
# Test runs are short (dev cases, no timing) and meant to be many; benchmark and profile
# runs take a host as long as a ranked one. Ranked runs per day keep their older name.
PKB_SUBMISSIONS_PER_DAY = envint("PKB_SUBMISSIONS_PER_DAY", 20)
PKB_RANKED_RUNS_PER_HOUR = envint("PKB_RANKED_RUNS_PER_HOUR", 0)
PKB_TEST_RUNS_PER_HOUR = envint("PKB_TEST_RUNS_PER_HOUR", 30)
PKB_TEST_RUNS_PER_DAY = envint("PKB_TEST_RUNS_PER_DAY", 200)
PKB_BENCHMARK_RUNS_PER_HOUR = envint("PKB_BENCHMARK_RUNS_PER_HOUR", 6)
PKB_BENCHMARK_RUNS_PER_DAY = envint("PKB_BENCHMARK_RUNS_PER_DAY", 30)
PKB_PROFILE_RUNS_PER_HOUR = envint("PKB_PROFILE_RUNS_PER_HOUR", 4)
PKB_PROFILE_RUNS_PER_DAY = envint("PKB_PROFILE_RUNS_PER_DAY", 20)
PKB_MAX_ACTIVE_SUBMISSIONS = envint("PKB_MAX_ACTIVE_SUBMISSIONS", 2)
_DAILY = (PKB_SUBMISSIONS_PER_DAY, PKB_TEST_RUNS_PER_DAY, PKB_BENCHMARK_RUNS_PER_DAY)
if min(*_DAILY, PKB_PROFILE_RUNS_PER_DAY, PKB_MAX_ACTIVE_SUBMISSIONS) <= 0:
    raise ImproperlyConfigured(
        "PKB_SUBMISSIONS_PER_DAY, PKB_TEST_RUNS_PER_DAY, PKB_BENCHMARK_RUNS_PER_DAY, "
        "PKB_PROFILE_RUNS_PER_DAY and PKB_MAX_ACTIVE_SUBMISSIONS must be positive"
    )
_HOURLY = (PKB_RANKED_RUNS_PER_HOUR, PKB_TEST_RUNS_PER_HOUR, PKB_BENCHMARK_RUNS_PER_HOUR)
if min(*_HOURLY, PKB_PROFILE_RUNS_PER_HOUR) < 0:
    raise ImproperlyConfigured(
        "PKB_RANKED_RUNS_PER_HOUR, PKB_TEST_RUNS_PER_HOUR, PKB_BENCHMARK_RUNS_PER_HOUR and "
        "PKB_PROFILE_RUNS_PER_HOUR must be 0 (no hourly limit) or positive"
    )

# Model and agent entries (portal/entries): an entry's samples are ranked runs of its team
# and count against the team's limits above like any upload; on top of that an entry sends
# at most PKB_ENTRY_SAMPLES_PER_DAY samples (bundles) in any 24 hours, declares at most
# PKB_ENTRY_MAX_SAMPLES samples per problem, and a team registers at most
# PKB_MAX_ENTRIES_PER_TEAM entries (each is listed on /entries/ and in the API).
PKB_ENTRY_SAMPLES_PER_DAY = envint("PKB_ENTRY_SAMPLES_PER_DAY", 40)
PKB_ENTRY_MAX_SAMPLES = envint("PKB_ENTRY_MAX_SAMPLES", 20)
PKB_MAX_ENTRIES_PER_TEAM = envint("PKB_MAX_ENTRIES_PER_TEAM", 5)
if min(PKB_ENTRY_SAMPLES_PER_DAY, PKB_ENTRY_MAX_SAMPLES, PKB_MAX_ENTRIES_PER_TEAM) <= 0:
    raise ImproperlyConfigured(
        "PKB_ENTRY_SAMPLES_PER_DAY, PKB_ENTRY_MAX_SAMPLES and PKB_MAX_ENTRIES_PER_TEAM must "
        "be positive"
    )

# Re-runs for the ranking: every PKB_RERUN_EVERY_S the beat judges each published problem's
# top PKB_RERUN_TOP entries again with fresh seeds, until each has PKB_RERUN_RUNS judged
# runs; boards rank by the runs' medians. Off unless PKB_RERUN_ENABLED (it costs GPU time).
PKB_RERUN_ENABLED = envbool("PKB_RERUN_ENABLED", False)
PKB_RERUN_TOP = envint("PKB_RERUN_TOP", 3)
PKB_RERUN_RUNS = envint("PKB_RERUN_RUNS", 3)
PKB_RERUN_EVERY_S = envint("PKB_RERUN_EVERY_S", 3600)
if min(PKB_RERUN_TOP, PKB_RERUN_RUNS, PKB_RERUN_EVERY_S) <= 0:
    raise ImproperlyConfigured(
        "PKB_RERUN_TOP, PKB_RERUN_RUNS and PKB_RERUN_EVERY_S must be positive"
    )
