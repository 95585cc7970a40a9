"""Writes of the entries app: registering an entry, and sending a batch of its samples."""

from __future__ import annotations

import hashlib
import logging
import os
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from evaluator.face import Bundle
from portal.accounts.models import Team
from portal.accounts.selectors import team_of
from portal.entries.models import Entry, EntryAttempt, EntryBatch, EntrySample, Kind
from portal.entries.selectors import entry_attempt_counts, entry_quota
from portal.problems.models import Problem
from portal.submissions.digests import code_digests
from portal.submissions.models import Submission
from portal.submissions.quotas import team_submission_quota
from portal.submissions.services import SubmissionError

# The Submit page's own checks and queueing, so that a sample is refused with the same
# words as a bundle uploaded there, and queued the same way (one request per bundle).
from portal.submissions.services.submissions import (
    enqueue_on_commit,
    problem_versions,
    read_checked_bundle,
    read_upload,
)

logger = logging.getLogger(__name__)


class EntryError(Exception):
    """A request about an entry that cannot be granted; the message is meant for the user."""


def _member_team(user: User, entry: Entry | None = None) -> Team:
    team = team_of(user)
    if team is None:
        raise EntryError("Join or create a team first: an entry belongs to a team.")
    if entry is not None and entry.team_id != team.pk:
        raise EntryError(f"The entry {entry.slug!r} belongs to another team.")
    if team.is_disqualified:
        raise EntryError(
            f"Your team is disqualified ({team.disqualification_reason}); "
            "its entries would not rank. Contact the organisers."
        )
    return team


def _check_declaration(*, samples_per_problem: int, k: int) -> None:
    most = settings.PKB_ENTRY_MAX_SAMPLES
    if not 1 <= k <= samples_per_problem:
        raise EntryError(
            f"k must be at least 1 and at most the samples per problem (n={samples_per_problem}"
            f", k={k}): pass@k is estimated from n >= k samples."
        )
    if samples_per_problem > most:
        raise EntryError(f"An entry declares at most {most} samples per problem.")


NOTE_MAX = 2000  # characters: the note is in every anonymous GET /api/entries/
EARLIEST_DATE = date(2020, 1, 1)  # before any model that writes kernels
# Bidirectional controls reorder what a page or a terminal shows (U+202E turns a name
# around): refused, as in bundle file names, with every other control character.
_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def _unsafe_character(text: str, *, lines: bool = False) -> str | None:
    for char in text:
        if lines and char in "\n\t":
            continue
        if unicodedata.category(char) == "Cc" or ord(char) in _BIDI:
            return f"U+{ord(char):04X}"
    return None


def _check_text(fields: dict[str, str], note: str) -> None:
    """Every text of the declaration, shown on pages, in the API and in the dataset: one
    line of printable characters (the note may have several), the note bounded."""
    for field, text in [*fields.items(), ("note", note)]:
        bad = _unsafe_character(text, lines=field == "note")
        if bad:
            raise EntryError(
                f"{field} holds a control or bidirectional character ({bad}); write it as "
                "plain text."
            )
    if len(note) > NOTE_MAX:
        raise EntryError(f"The note has {len(note)} characters; at most {NOTE_MAX}.")


def _check_date(evaluated_on: date | None) -> date:
    today = timezone.localdate()
    if evaluated_on is None:
        return today
    if not EARLIEST_DATE <= evaluated_on <= today + timedelta(days=1):
        raise EntryError(
            f"evaluated_on {evaluated_on.isoformat()} is not a date of an evaluation: "
            f"between {EARLIEST_DATE.isoformat()} and today."
        )
    return evaluated_on


def entry_register(
    *,
    user: User,
    name: str,
    kind: str,
    model_name: str,
    samples_per_problem: int,
    k: int,
    slug: str = "",
    model_version: str = "",
    harness: str = "",
    sampling: str = "",
    note: str = "",
    evaluated_on: date | None = None,
) -> Entry:
    """Register an entry of the user's team, with its declared samples per problem and k."""
    team = _member_team(user)
    if kind not in Kind.values:
        raise EntryError(f"kind must be one of: {', '.join(Kind.values)}.")
    _check_declaration(samples_per_problem=samples_per_problem, k=k)
    texts = {"name": name, "slug": slug, "model_name": model_name,
             "model_version": model_version, "harness": harness, "sampling": sampling}  # fmt: skip
    _check_text(texts, note)
    evaluated_on = _check_date(evaluated_on)
    name = name.strip()
    slug = slugify(slug or name)[:64]
    if not name or not slug or not model_name.strip():
        raise EntryError("An entry needs a name (with a letter or digit) and a model name.")
    if Entry.objects.filter(slug=slug).exists() or Entry.objects.filter(name__iexact=name).exists():
        raise EntryError(f"An entry named {name!r} ({slug}) exists already; choose another name.")
    _check_entry_count(team)
    try:
        with transaction.atomic():
            # The team's row serialises its registrations: two at once must not both take
            # the last entry it may register.
            _check_entry_count(Team.objects.select_for_update().get(pk=team.pk))
            entry = Entry.objects.create(
                team=team,
                slug=slug,
                name=name,
                kind=kind,
                model_name=model_name.strip(),
                model_version=model_version.strip(),
                harness=harness.strip(),
                sampling=sampling.strip(),
                note=note.strip(),
                evaluated_on=evaluated_on,
                samples_per_problem=samples_per_problem,
                k=k,
                created_by=user,
            )
    except IntegrityError:  # registered at the same moment by someone else
        raise EntryError(f"An entry named {name!r} exists already; choose another name.") from None
    logger.info("entry %s registered by team %s (n=%s, k=%s)", slug, team.slug, entry.n, k)
    return entry


@dataclass(frozen=True)
class _Checked:
    filename: str
    data: bytes
    bundle: Bundle


def _check_samples(uploads: Sequence[UploadedFile], *, profile: str) -> list[_Checked]:
    checked = []
    for number, upload in enumerate(uploads, start=1):
        filename = os.path.basename(upload.name or f"sample_{number}")[:255]
        try:
            data = read_upload(upload)
            bundle = read_checked_bundle(filename, data, profile=profile)
        except SubmissionError as exc:
            raise EntryError(
                f"Sample {number} of the batch ({filename}): {exc} Nothing of the batch was kept."
            ) from None
        checked.append(_Checked(filename, data, bundle))
    return checked


def _check_batch_size(entry: Entry, count: int) -> None:
    if count == 0:
        raise EntryError("The batch holds no sample: send one bundle per sample.")
    if count > entry.n:
        raise EntryError(
            f"A batch holds at most the entry's {entry.n} samples per problem; this one has "
            f"{count}."
        )


def _check_team_budget(team: Team, count: int) -> None:
    """The team's one budget: each sample is a ranked run of the team (its ranked windows
    and its runs at once)."""
    refusal = team_submission_quota(team).batch_refusal(count)
    if refusal:
        raise EntryError(f"{refusal} Nothing of the batch was kept.")


def _check_entry_count(team: Team) -> None:
    most = settings.PKB_MAX_ENTRIES_PER_TEAM
    if team.entries.count() >= most:
        raise EntryError(
            f"Your team has registered {most} entries, the most a team may (PKB_MAX_ENTRIES_PER_"
            "TEAM); send more samples to one of them instead."
        )


def _check_quota(entry: Entry, count: int) -> None:
    quota = entry_quota(entry)
    if quota.used + count > quota.limit:
        when = f"; the next slot opens at {quota.next_slot_text}" if quota.next_slot_at else ""
        raise EntryError(
            f"The entry {entry.slug!r} may send {quota.limit} samples in any 24 hours and has "
            f"sent {quota.used}; this batch of {count} would pass that{when}. Nothing of the "
            "batch was kept."
        )


def _check_attempts(entry: Entry, checked: list[_Checked]) -> Counter[str]:
    """Refuse the batch if it would give any problem more than the declared n samples."""
    sent = entry_attempt_counts(entry)
    batch = Counter(slug for c in checked for slug in c.bundle.solutions)
    over = sorted(slug for slug, count in batch.items() if sent.get(slug, 0) + count > entry.n)
    if over:
        detail = ", ".join(
            f"{slug} ({sent.get(slug, 0)} sent, {batch[slug]} more)" for slug in over
        )
        raise EntryError(
            f"Refused: the entry {entry.slug!r} declared {entry.n} samples per problem, and "
            f"this batch would send more than that for {detail}. pass@k is estimated from the "
            "declared samples only, so extra ones are never taken. Nothing of the batch was kept."
        )
    return Counter(sent)


def _store_sample(
    entry: Entry,
    batch: EntryBatch,
    checked: _Checked,
    *,
    user: User,
    number: int,
    sent: Counter,
    saved: list[str],
) -> EntrySample:
    slugs = sorted(checked.bundle.solutions)
    submission = Submission(
        team=entry.team,
        user=user,
        bundle_name=checked.filename,
        bundle_sha256=hashlib.sha256(checked.data).hexdigest(),
        profile=settings.PKB_SUBMISSION_PROFILE,
        problems=slugs,
        code_digests=code_digests(checked.bundle),
        status=Submission.Status.QUEUED,
        queued_at=timezone.now(),
        problem_versions=problem_versions(slugs),
    )
    submission.bundle.save(checked.filename, ContentFile(checked.data), save=False)
    saved.append(submission.bundle.name or "")
    submission.save()
    sample = EntrySample.objects.create(
        entry=entry, batch=batch, submission=submission, number=number
    )
    problems = Problem.objects.in_bulk(slugs, field_name="slug")
    attempts = []
    for slug in slugs:
        sent[slug] += 1
        attempts.append(
            EntryAttempt(entry=entry, sample=sample, problem=problems[slug], number=sent[slug])
        )
    EntryAttempt.objects.bulk_create(attempts)
    enqueue_on_commit(submission, bundle=checked.data)
    return sample


def entry_samples_submit(
    *, user: User, entry: Entry, uploads: Sequence[UploadedFile]
) -> EntryBatch:
    """Check, store and queue a batch of the entry's samples, one bundle each, or raise
    EntryError and keep nothing. Each sample is a ranked submission of the entry's team,
    judged on the hidden set like any other, counted for the entry only.

    Must not run inside a transaction: like submission_create, it owns the commit that
    makes the stored files and the rows appear together.
    """
    team = _member_team(user, entry)
    _check_batch_size(entry, len(uploads))
    # Before reading the bundles: a refusal costs nothing.
    _check_team_budget(team, len(uploads))
    _check_quota(entry, len(uploads))
    checked = _check_samples(uploads, profile=settings.PKB_SUBMISSION_PROFILE)
    _check_attempts(entry, checked)
    stored: list[EntrySample] = []
    saved: list[str] = []  # files stored so far: removed again if the batch fails
    try:
        with transaction.atomic(durable=True):
            # The team's row serialises everything that queues its work (as in
            # submission_create, which takes it too), the entry's row its batches: two at
            # once must not both take the team's last slot, a problem's last declared
            # sample, nor the entry's last sample of the day. Team first, always.
            _check_team_budget(Team.objects.select_for_update().get(pk=team.pk), len(uploads))
            entry = Entry.objects.select_for_update().select_related("team").get(pk=entry.pk)
            _check_quota(entry, len(uploads))
            sent = _check_attempts(entry, checked)
            batch = EntryBatch.objects.create(entry=entry, user=user)
            first = (
                entry.samples.order_by("-number").values_list("number", flat=True).first()
            ) or 0
            for offset, one in enumerate(checked, start=1):
                number = first + offset
                stored.append(
                    _store_sample(
                        entry, batch, one, user=user, number=number, sent=sent, saved=saved
                    )
                )
    except BaseException:
        storage = Submission._meta.get_field("bundle").storage
        for name in filter(None, saved):
            storage.delete(name)
        raise
    logger.info(
        "entry %s: batch %s of %d samples queued (%s)",
        entry.slug,
        batch.pk,
        len(stored),
        [s.submission_id for s in stored],
    )
    return batch
