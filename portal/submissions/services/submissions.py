from __future__ import annotations

import hashlib
import logging
import os
import uuid

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluator.face import Bundle, BundleError, EvaluationRequest, Mode, get_profile, read_bundle
from portal.accounts.models import Team
from portal.accounts.selectors import team_of
from portal.problems.models import Problem
from portal.submissions import broker
from portal.submissions.digests import code_digests
from portal.submissions.hardware import UnknownProfile, check_profile
from portal.submissions.models import EXAMPLE_LABEL_MAX, ProblemResult, Submission
from portal.submissions.quotas import team_submission_quota
from portal.submissions.services.artifacts import artifacts_discard
from portal.submissions.services.review import bundle_precheck

logger = logging.getLogger(__name__)


class SubmissionError(Exception):
    """A submission that cannot be accepted; the message is meant for the user, `field` is
    the form's field it is about."""

    def __init__(self, message: str, *, field: str = "bundle"):
        super().__init__(message)
        self.field = field


def read_upload(upload: UploadedFile) -> bytes:
    limit = settings.PKB_BUNDLE_MAX_BYTES
    too_big = f"The bundle is larger than {limit // (1024 * 1024)} MiB."
    # The declared size first, so that a huge upload is never read into memory.
    if upload.size is not None and upload.size > limit:
        raise SubmissionError(too_big)
    upload.seek(0)
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise SubmissionError(too_big)
    return data


def read_checked_bundle(filename: str, data: bytes, *, profile: str) -> Bundle:
    rows = {p.slug: p for p in Problem.objects.only("slug", "status", "profiles")}
    statuses = {slug: p.status for slug, p in rows.items()}
    published = {slug for slug, status in statuses.items() if status == Problem.Status.PUBLISHED}
    try:
        # Every known slug, so that a hidden or retired one gets its own message below.
        bundle = read_bundle(filename, data, known_slugs=set(statuses))
    except BundleError as exc:
        # The message may list the known problems: say it again over the published ones
        # only, so that an error never names an unpublished problem.
        try:
            read_bundle(filename, data, known_slugs=published)
        except BundleError as public:
            raise SubmissionError(str(public)) from exc
        raise SubmissionError(str(exc)) from exc
    closed = sorted(set(bundle.solutions) - published)
    if closed:
        raise SubmissionError(
            f"Not open for submissions: {', '.join(closed)}. Remove "
            f"{'it' if len(closed) == 1 else 'them'} from the bundle and submit again."
        )
    # Admins choose the hardware a problem is judged on (Problem.profiles).
    elsewhere = sorted(slug for slug in bundle.solutions if not rows[slug].runs_on(profile))
    if elsewhere:
        raise SubmissionError(
            f"Not judged on {get_profile(profile).label}: {', '.join(elsewhere)}. Remove "
            f"{'it' if len(elsewhere) == 1 else 'them'} from the bundle and submit again."
        )
    return bundle


def _check_limits(team: Team, *, mode: str, example: bool = False) -> None:
    if team.is_disqualified:
        raise SubmissionError(
            f"Your team is disqualified ({team.disqualification_reason}); "
            "its submissions would not rank. Contact the organisers."
        )
    if example:
        return  # the quota shares hosts fairly between competing teams; examples are staff's
    refusal = team_submission_quota(team).refusal(mode)
    if refusal:
        raise SubmissionError(refusal)


def _check_profile_case(slugs: list[str], case: str) -> None:
    """A case to profile must be a public (dev) case of every problem of the bundle: a
    trace of an unpublished eval case would reveal its shapes, so none is ever named here."""
    if not case:
        return
    cases = Problem.objects.filter(slug__in=slugs).values_list("slug", "public_cases")
    for slug, public in cases:
        names = [c.get("name") for c in public or [] if isinstance(c, dict)]
        if case not in names:
            raise SubmissionError(
                f"{case!r} is not a public case of {slug}; its public cases: "
                f"{', '.join(map(str, names)) or 'none'}. Only public (dev) cases can be "
                "profiled; leave it empty and the host picks one.",
                field="profile_case",
            )


def problem_versions(slugs: list[str]) -> dict[str, int]:
    """The versions an attempt queued now is judged against (recorded with its results)."""
    return dict(Problem.objects.filter(slug__in=slugs).values_list("slug", "version"))


def enqueue_on_commit(submission: Submission, *, bundle: bytes | None = None) -> None:
    """Send the current attempt to its profile's queue once the transaction commits.

    A send that fails (the broker is down) is logged and left to the sweeper, which re-sends
    a queued submission whose request the broker does not hold (no sent marker).
    """
    evaluation_id = str(submission.evaluation_id)

    def send() -> None:
        data = bundle
        if data is None:
            with submission.bundle.open("rb") as fh:
                data = fh.read()
        request = EvaluationRequest.build(
            evaluation_id=evaluation_id,
            submission_id=submission.pk,
            profile=submission.profile,
            bundle_name=submission.bundle_name,
            bundle=data,
            problems=list(submission.problems),
            mode=Mode(submission.mode),
            profile_case=submission.profile_case,
        )
        queue = get_profile(submission.profile).queue_for(submission.mode)
        broker.send_evaluation(request, queue=queue)

    transaction.on_commit(send, robust=True)


def _check_example_label(user: User, label: str, *, mode: str) -> str:
    label = label.strip()
    if label and not user.is_staff:
        raise SubmissionError("Only staff may submit an example.")
    if label and mode != Submission.Mode.RANKED:
        raise SubmissionError("An example is a ranked run: it is shown on the boards.")
    if len(label) > EXAMPLE_LABEL_MAX:
        raise SubmissionError(f"An example's label has at most {EXAMPLE_LABEL_MAX} characters.")
    return label


def _check_run(mode: str, profile: str | None, profile_case: str) -> tuple[str, str, str]:
    """The run asked for, checked (the form checks the same for its pages and the API)."""
    if mode not in Submission.Mode.values:
        raise SubmissionError(
            f"Unknown mode {mode!r}; one of: {', '.join(Submission.Mode.values)}.", field="mode"
        )
    try:
        profile = check_profile(profile or settings.PKB_SUBMISSION_PROFILE)
    except UnknownProfile as exc:
        raise SubmissionError(str(exc), field="profile") from None
    case = profile_case.strip()
    if case and mode != Submission.Mode.PROFILE:
        raise SubmissionError("A case to profile is for profile runs only.", field="profile_case")
    return mode, profile, case


def submission_create(
    *,
    user: User,
    upload: UploadedFile,
    example_label: str = "",
    mode: str = Submission.Mode.RANKED,
    profile: str | None = None,
    profile_case: str = "",
) -> Submission:
    """Check, store and queue a bundle for the user's team, or raise SubmissionError.

    `mode`: what the host does with it (Submission.Mode; only ranked runs count on the
    boards), within the team's quota of that mode. `profile`: the hardware it is judged on
    (default PKB_SUBMISSION_PROFILE); one without a worker now is accepted and waits.
    `profile_case`: for a profile run, the public case to profile ("": the host picks).
    `example_label`: staff's example bundle, shown on the boards under that label and never
    ranked (Submission.example_label); judged like any other, outside the team's quota.
    Must not run inside a transaction (no ATOMIC_REQUESTS): it owns the commit that makes
    the stored file and the row appear together.
    """
    mode, profile, profile_case = _check_run(mode, profile, profile_case)
    example_label = _check_example_label(user, example_label, mode=mode)
    team = team_of(user)
    if team is None:
        raise SubmissionError("Join or create a team before submitting.")
    example = bool(example_label)
    # Before reading the bundle: a refusal costs nothing.
    _check_limits(team, mode=mode, example=example)
    data = read_upload(upload)
    filename = os.path.basename(upload.name or "bundle")[:255]
    bundle = read_checked_bundle(filename, data, profile=profile)
    _check_profile_case(sorted(bundle.solutions), profile_case)
    submission = Submission(
        team=team,
        user=user,
        bundle_name=filename,
        bundle_sha256=hashlib.sha256(data).hexdigest(),
        profile=profile,
        mode=mode,
        profile_case=profile_case,
        problems=sorted(bundle.solutions),
        code_digests=code_digests(bundle),
        precheck=bundle_precheck(bundle),
        status=Submission.Status.QUEUED,
        queued_at=timezone.now(),
        example_label=example_label,
    )
    # durable: this block is the outermost transaction, so leaving it without an error means
    # the row is committed, and an error means it is not: then the file must go too.
    try:
        with transaction.atomic(durable=True):
            # The team's row is the lock that serialises its submissions: two uploads at
            # once must not both take the last slot.
            team = Team.objects.select_for_update().get(pk=team.pk)
            _check_limits(team, mode=mode, example=example)
            submission.problem_versions = problem_versions(submission.problems)
            submission.bundle.save(filename, ContentFile(data), save=False)
            submission.save()
            enqueue_on_commit(submission, bundle=data)
    except BaseException:
        if submission.bundle.name:
            submission.bundle.storage.delete(submission.bundle.name)
        raise
    logger.info(
        "submission %s queued: team %s, %s run on %s, %s%s",
        submission.pk,
        team.slug,
        mode,
        profile,
        submission.problems,
        f", example {example_label!r}" if example else "",
    )
    return submission


def submission_requeue(*, submission: Submission, reason: str) -> bool:
    """Start a new attempt: a new evaluation_id, so that the old attempt's messages drop
    and a host still running it stops."""
    old_id = str(submission.evaluation_id)
    with transaction.atomic():
        updated = Submission.objects.filter(
            pk=submission.pk, evaluation_id=submission.evaluation_id
        ).update(
            evaluation_id=uuid.uuid4(),
            attempts=F("attempts") + 1,
            status=Submission.Status.QUEUED,
            reason=reason,
            problem_versions=problem_versions(submission.problems),
            queued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            heartbeat_at=None,
            progress_done=0,
            progress_total=0,
            current_problem="",
        )
        if not updated:
            return False  # changed under us (finished, requeued): the caller's view is stale
        ProblemResult.objects.filter(submission_id=submission.pk).delete()
        artifacts_discard(submission=submission)
        submission.refresh_from_db()
        transaction.on_commit(
            lambda: broker.attempt_over(old_id, reason="superseded by a new attempt"),
            robust=True,
        )
        enqueue_on_commit(submission)
    return True


def submission_cancel(*, submission: Submission, reason: str = "Cancelled by an admin.") -> bool:
    """Stop counting on an active submission: its host stops within seconds (and its
    later messages are dropped)."""
    with transaction.atomic():
        updated = Submission.objects.filter(pk=submission.pk, status__in=Submission.ACTIVE).update(
            status=Submission.Status.CANCELLED, reason=reason, finished_at=timezone.now()
        )
        if updated:
            # The current attempt's id, read after the update: a requeue cannot slip between.
            current = Submission.objects.values_list("evaluation_id", flat=True)
            eid = str(current.get(pk=submission.pk))
            transaction.on_commit(lambda: broker.attempt_over(eid, reason="cancelled"), robust=True)
    return bool(updated)


def submission_resend(*, submission: Submission) -> bool:
    """Send the same attempt again (its message may have been lost with the broker)."""
    with transaction.atomic():
        updated = Submission.objects.filter(
            pk=submission.pk,
            evaluation_id=submission.evaluation_id,
            status=Submission.Status.QUEUED,
        ).update(queued_at=timezone.now())
        if updated:
            enqueue_on_commit(submission)
    return bool(updated)
