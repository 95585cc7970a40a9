"""Health for the load balancer, the queue for everyone, metrics for Prometheus."""

from __future__ import annotations

import hmac
from datetime import datetime

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST

from portal.ops import canaries, checks, metrics, selectors


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


def _queue_json(now: datetime) -> list[dict]:
    rows = selectors.queue_rows()
    hosts = canaries.host_readings({row.profile for row in rows}, now=now.timestamp())
    return [
        {
            "profile": row.profile,
            "label": row.label,
            "queued": row.queued,
            "running": row.running,
            "oldest_wait_s": row.oldest_wait_s(now),
            "hosts": [host.to_json() for host in hosts[row.profile]],
        }
        for row in rows
    ]


@never_cache
@require_safe
def queue(request: HttpRequest) -> HttpResponse:
    """Per hardware profile: submissions waiting and running, the longest wait, and each
    connected host's canary (same code judged against itself)."""
    now = timezone.now()
    rows = selectors.queue_rows()
    hosts = canaries.host_readings({row.profile for row in rows}, now=now.timestamp())
    return render(
        request,
        "ops/queue.html",
        {"rows": [(row, row.oldest_wait_s(now), hosts[row.profile]) for row in rows]},
    )


@never_cache
@require_safe
def queue_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"profiles": _queue_json(timezone.now())})


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
