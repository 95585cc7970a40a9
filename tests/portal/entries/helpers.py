"""Sending and judging an entry's samples through the portal's own services."""

from __future__ import annotations

from evaluator.contract import ProblemResult as Reported
from evaluator.contract import ProblemStatus
from portal.entries.services import entry_samples_submit
from tests.portal.bundles import solving, upload
from tests.portal.judging import finish, passed


def send(user, entry, *bundles: bytes):
    """A batch of samples, one bundle each; the batch."""
    uploads = [upload(data, f"sample_{i}.zip") for i, data in enumerate(bundles, start=1)]
    return entry_samples_submit(user=user, entry=entry, uploads=uploads)


def wrong(slug: str) -> Reported:
    return Reported(slug, ProblemStatus.WRONG_ANSWER, 4, message="rank 1 differs")


def judge(sample, *results) -> None:
    """The host's finished message for the sample's submission."""
    assert finish(sample.submission.evaluation_id, *results)


def three_samples(user, entry):
    """Three samples of all-reduce: a pass at 1.5x (1.45-1.55), a pass at 1.02x whose
    interval reaches below 1, a wrong answer. n=3, c=2, f=1."""
    batch = send(user, entry, *[solving("all-reduce")] * 3)
    first, second, third = batch.samples.order_by("number")
    judge(first, passed("all-reduce", 1.5, 1.45, 1.55))
    judge(second, passed("all-reduce", 1.02, 0.97, 1.07))
    judge(third, wrong("all-reduce"))
    return batch
