"""A host's artifacts (a profile run's traces and tables) kept with its results.

They come in the finished message, checked by the contract (`read_artifacts`): plain
names, four media types, 8 MiB each, 24 MiB together. Results never wait on them: a
message whose artifacts break the contract, or a file that cannot be written, is logged
and recorded without them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

from django.core.files.base import ContentFile
from django.db import transaction

from evaluator.face import Artifact as Reported
from evaluator.face import ContractError, read_artifacts
from portal.submissions.models import Artifact, Submission

logger = logging.getLogger(__name__)


def artifacts_read(*, evaluation_id: uuid.UUID, data: Any) -> list[tuple[Reported, bytes]]:
    """A finished message's "artifacts" with their bytes, or none when they break the
    contract (the results they came with are recorded all the same)."""
    try:
        return [(artifact, artifact.data()) for artifact in read_artifacts(data)]
    except ContractError as exc:
        logger.error("evaluation %s: artifacts dropped, results kept: %s", evaluation_id, exc)
        return []


def _storage():
    return Artifact._meta.get_field("file").storage


def artifact_files_delete(names: Iterable[str]) -> None:
    storage = _storage()
    for name in names:
        if name:
            storage.delete(name)


def artifacts_keep(*, submission: Submission, artifacts: list[tuple[Reported, bytes]]) -> list[str]:
    """Store each artifact's file and row for the submission's current attempt, inside the
    caller's transaction; returns the stored files' names, which the caller deletes if the
    transaction fails. A file that cannot be written (a full disk) is left out, logged."""
    rows, stored = [], []
    for reported, data in artifacts:
        row = Artifact(
            submission=submission,
            evaluation_id=submission.evaluation_id,
            name=reported.name,
            media_type=reported.media_type,
            size=len(data),
            truncated=reported.truncated,
            note=reported.note,
        )
        try:
            row.file.save(reported.name, ContentFile(data), save=False)
        except OSError as exc:
            logger.error("submission %s: artifact %s not kept: %s", submission.pk, row.name, exc)
            continue
        rows.append(row)
        stored.append(row.file.name or "")
    Artifact.objects.bulk_create(rows)
    return stored


def artifacts_discard(*, submission: Submission) -> None:
    """Drop an attempt's artifacts when a new attempt replaces its results; the files go
    once the transaction commits."""
    rows = Artifact.objects.filter(submission=submission)
    names = list(rows.values_list("file", flat=True))
    rows.delete()
    transaction.on_commit(lambda: artifact_files_delete(names), robust=True)
