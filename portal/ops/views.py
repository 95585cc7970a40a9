"""Health for the load balancer, the queue for everyone, metrics for Prometheus."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from portal.accounts.selectors import team_of
from portal.ops import canaries, checks, metrics, selectors
from portal.submissions import broker


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer, else 503: the load balancer takes this
    process out of rotation rather than let it fail every request."""
    results = checks.health()
    healthy = all(results.values())
    body = {
        "status": "ok" if healthy else "unavailable",
        "checks": {name: "ok" if ok else "unreachable" for name, ok in results.items()},
    }
    return JsonResponse(body, status=200 if healthy else 503)


@dataclass(frozen=True)
class ProfileQueue:
    """A profile's line on the queue page: its evaluations, hosts and the viewer's own."""

    row: selectors.QueueRow
    wait_s: float | None
    workers: list[str] | None  # connected now; None when the broker cannot say
    hosts: list[canaries.HostReading]
    yours: list[selectors.QueuePlace]

    def to_json(self) -> dict[str, Any]:
        row = self.row
        return {
            "profile": row.profile,
            "label": row.label,
            "queued": row.queued,
            "running": row.running,
            "reruns_queued": row.reruns_queued,
            "reruns_running": row.reruns_running,
            "oldest_wait_s": self.wait_s,
            "workers": None if self.workers is None else len(self.workers),
            "hosts": [host.to_json() for host in self.hosts],
            "yours": [place.to_json() for place in self.yours],
        }


def _profile_queues(request: HttpRequest) -> list[ProfileQueue]:
    now = timezone.now()
    rows = selectors.queue_rows()
    profiles = {row.profile for row in rows}
    hosts = canaries.host_readings(profiles, now=now.timestamp())
    workers = broker.workers_connected(profiles, now=now.timestamp())
    places = selectors.team_queue_places(team_of(request.user))
    return [
        ProfileQueue(
            row=row,
            wait_s=row.oldest_wait_s(now),
            workers=None if workers is None else workers[row.profile],
            hosts=hosts[row.profile],
            yours=[p for p in places if p.profile == row.profile],
        )
        for row in rows
    ]


@never_cache
@require_safe
def queue(request: HttpRequest) -> HttpResponse:
    """Per hardware profile: evaluations waiting and running (submissions and re-runs), the
    longest wait, the hosts connected now with their canaries (same code judged against
    itself), and where the viewer's team's own evaluations stand."""
    return render(request, "ops/queue.html", {"queues": _profile_queues(request)})


@never_cache
@require_safe
def queue_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"profiles": [q.to_json() for q in _profile_queues(request)]})


def _authorized(request: HttpRequest) -> bool:
    token = settings.PKB_METRICS_TOKEN
    if not token:
        return True
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


@never_cache
@require_safe
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    if not _authorized(request):
        response = HttpResponse("a bearer token is required\n", status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    return HttpResponse(metrics.render(), content_type=CONTENT_TYPE_LATEST)
