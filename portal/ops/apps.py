from __future__ import annotations

from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Operating the site: health, queue view, Prometheus metrics, retention, backups."""

    name = "portal.ops"
    label = "ops"
