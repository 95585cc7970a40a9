"""Prometheus metrics, read from the database and the broker at each scrape.

prometheus_client writes the exposition format; this module only says what each number
is. The numbers come from the database, not from counters in one process: gunicorn runs
several web processes and any of them may answer a scrape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import redis
from django.conf import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from evaluator.face import PROFILES
from portal.ops import checks, selectors

logger = logging.getLogger(__name__)


class PortalCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from self._queue()
        yield self._states()
        yield self._durations()
        yield self._heartbeats()
        yield from self._broker()

    def _queue(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "pkb_queue_depth",
            "Evaluations (submissions and re-runs) waiting for a host, per profile",
            labels=["profile"],
        )
        running = GaugeMetricFamily(
            "pkb_queue_running",
            "Evaluations (submissions and re-runs) being evaluated, per profile",
            labels=["profile"],
        )
        reruns = GaugeMetricFamily(
            "pkb_queue_reruns",
            "Re-runs for the ranking among the evaluations, per profile and state",
            labels=["profile", "state"],
        )
        oldest = GaugeMetricFamily(
            "pkb_queue_oldest_queued_timestamp_seconds",
            "When the longest-waiting evaluation of a profile was queued (absent: none waits)",
            labels=["profile"],
        )
        for row in selectors.queue_rows():
            depth.add_metric([row.profile], row.queued)
            running.add_metric([row.profile], row.running)
            reruns.add_metric([row.profile, "queued"], row.reruns_queued)
            reruns.add_metric([row.profile, "running"], row.reruns_running)
            if row.oldest_queued_at is not None:
                oldest.add_metric([row.profile], row.oldest_queued_at.timestamp())
        yield from (depth, running, reruns, oldest)

    def _states(self) -> Metric:
        family = GaugeMetricFamily(
            "pkb_submissions", "Submissions per profile and state", labels=["profile", "state"]
        )
        for (profile, state), count in selectors.submissions_per_state().items():
            family.add_metric([profile, state], count)
        return family

    def _durations(self) -> Metric:
        family = HistogramMetricFamily(
            "pkb_evaluation_duration_seconds",
            "Time from a host's start to the finished evaluation, per profile",
            labels=["profile"],
        )
        for h in selectors.evaluation_durations():
            buckets = [(repr(bound), count) for bound, count in h.buckets]
            family.add_metric([h.profile], buckets + [("+Inf", h.count)], sum_value=h.sum_s)
        return family

    def _heartbeats(self) -> Metric:
        family = GaugeMetricFamily(
            "pkb_evaluation_last_heartbeat_timestamp_seconds",
            "Last heartbeat recorded per host now evaluating (alert on time() minus it)",
            labels=["host", "profile"],
        )
        for (host, profile), at in selectors.host_heartbeats().items():
            family.add_metric([host, profile], at.timestamp())
        return family

    def _broker(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("pkb_broker_up", "1 when the broker answered this scrape")
        try:
            lengths = checks.broker_queue_lengths()
        except redis.RedisError:
            logger.warning("metrics: broker unreachable", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        messages = GaugeMetricFamily(
            "pkb_broker_queue_messages",
            "Messages waiting in the broker, per Celery queue",
            labels=["queue"],
        )
        for queue, length in lengths.items():
            messages.add_metric([queue], length)
        yield messages
        workers = GaugeMetricFamily(
            "pkb_worker_heartbeat_timestamp_seconds",
            "When each evaluator worker last sent its heartbeat, busy or idle",
            labels=["profile", "worker"],
        )
        connected = GaugeMetricFamily(
            "pkb_workers_connected",
            "Evaluator workers connected now (a heartbeat within three), per profile",
            labels=["profile"],
        )
        heartbeats = checks.worker_heartbeats()
        since = time.time() - 3 * settings.PKB_HEARTBEAT_S
        for (profile, worker), at in heartbeats.items():
            workers.add_metric([profile, worker], at)
        for profile in PROFILES:
            alive = sum(1 for (p, _), at in heartbeats.items() if p == profile and at >= since)
            connected.add_metric([profile], alive)
        yield workers
        yield connected


# A registry of its own: the default one would add this web process's own numbers, which
# differ between gunicorn's processes and say nothing about the site.
REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(PortalCollector())


def render() -> bytes:
    return generate_latest(REGISTRY)
