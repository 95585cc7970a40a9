from __future__ import annotations

from django.urls import path

from portal.ops import views

app_name = "ops"

urlpatterns = [
    path("health/", views.health, name="health"),
    path("queue/", views.queue, name="queue"),
    path("queue.json", views.queue_json, name="queue-json"),
    # No trailing slash: Prometheus's default metrics_path.
    path("metrics", views.prometheus_metrics, name="metrics"),
]
