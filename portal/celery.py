"""The portal's Celery app: records what evaluator hosts report, and sweeps stuck work.

Run a worker on the portal queue and one beat:
    celery -A portal worker -Q portal
    celery -A portal beat
Its configuration is the CELERY_* block of portal/settings/__init__.py.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
