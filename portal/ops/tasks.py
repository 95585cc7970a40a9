from __future__ import annotations

from celery import shared_task
from django.conf import settings

from portal.ops.retention import retention_apply

RETENTION_TASK = "portal.retention"


@shared_task(name=RETENTION_TASK)
def retention() -> dict[str, int | list[int]]:
    report = retention_apply(days=settings.PKB_RETENTION_DAYS)
    return {"logs_cleared": report.logs_cleared, "bundles_deleted": report.bundles_deleted}
