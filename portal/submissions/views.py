from __future__ import annotations

import io

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_safe

from evaluator.face import ARTIFACT_CAP_BYTES, get_profile
from portal.accounts.selectors import team_of
from portal.problems.models import Problem
from portal.submissions.downloads import Download, artifact_of, artifact_response, public_download
from portal.submissions.forms import SubmissionForm
from portal.submissions.hardware import profile_offers, waiting_notice
from portal.submissions.models import Submission
from portal.submissions.quotas import SubmissionQuota, team_submission_quota
from portal.submissions.selectors import (
    environment_facts,
    problem_public_solutions,
    submission_result_lines,
    team_recent_submissions,
)
from portal.submissions.services import SubmissionError, submission_create


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def submit(request: HttpRequest) -> HttpResponse:
    team = team_of(request.user)
    if team is None:
        messages.info(request, "Create or join a team first: submissions count for a team.")
        return redirect("accounts:team")
    form = SubmissionForm()
    status = 200
    if request.method == "POST":
        form = SubmissionForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                submission = submission_create(user=request.user, **form.cleaned_data_for_run())
            except SubmissionError as exc:
                form.add_error(exc.field, str(exc))
            else:
                notice = waiting_notice(submission.profile)
                if notice:
                    messages.warning(request, notice)
                return redirect("submissions:detail", pk=submission.pk)
        status = 400
    quota = team_submission_quota(team)
    return render(
        request,
        "submissions/submit.html",
        {
            "form": form,
            "team": team,
            "quota": quota,
            "modes": _mode_choices(quota),
            "offers": profile_offers(),
            "submissions": team_recent_submissions(team),
        },
        status=status,
    )


def _mode_choices(quota: SubmissionQuota) -> list[dict]:
    return [
        {
            "value": mode,
            "label": Submission.Mode(mode).label,
            "help": Submission.MODE_HELP[Submission.Mode(mode)],
            "quota": quota[mode],
        }
        for mode in Submission.Mode.values
    ]


def _visible_submission(request: HttpRequest, pk: int) -> Submission:
    queryset = Submission.objects.visible_to(request.user).select_related(
        "team", "user", "entry_sample__entry"
    )
    return get_object_or_404(queryset, pk=pk)


def _detail_context(submission: Submission) -> dict:
    artifacts = list(submission.artifacts.all())
    return {
        "submission": submission,
        "artifacts": artifacts,
        "has_trace": any(a.is_trace for a in artifacts),
        "artifact_cap_mib": ARTIFACT_CAP_BYTES // (1024 * 1024),
        "lines": submission_result_lines(submission),
        "environment": environment_facts(submission.environment),
        "profile": get_profile(submission.profile),
        "mode_help": Submission.MODE_HELP.get(submission.mode, ""),
    }


@login_required
@require_safe
def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    return render(request, "submissions/detail.html", _detail_context(submission))


@login_required
@require_safe
def submission_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The live part of the detail page, polled by htmx while the evaluation runs."""
    submission = _visible_submission(request, pk)
    return render(request, "submissions/_status.html", _detail_context(submission))


@login_required
@require_safe
def submission_artifact(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """A host's artifact of the submission (a profile run's trace or table), for its team
    and staff; anyone else gets the 404 of the submission itself."""
    submission = _visible_submission(request, pk)
    return artifact_response(artifact_of(submission, name))


@require_safe
def submission_bundle(request: HttpRequest, pk: int) -> HttpResponse:
    """The bundle as uploaded, for its team and staff, and for anyone if it is an example.
    For anyone else once a problem it passed has its solutions published
    (Problem.solutions_public_after): the bundle, or, if it also solves problems whose
    solutions are not public, an archive of the public problems' files only
    (portal/submissions/downloads.py)."""
    submission = Submission.objects.downloadable_by(request.user).filter(pk=pk).first()
    if submission is None:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        raise Http404("No such submission.")
    download = _download_for(request, submission)
    try:
        if download.data is not None:
            handle = io.BytesIO(download.data)
        else:
            handle = submission.bundle.open("rb")
    except FileNotFoundError:
        raise Http404("The bundle's file is gone.") from None
    # Always an attachment, never rendered: the name is the user's, the content theirs too.
    return FileResponse(
        handle,
        as_attachment=True,
        filename=download.filename,
        content_type="application/octet-stream",
    )


def _download_for(request: HttpRequest, submission: Submission) -> Download:
    # An example is published code, whole: its helpers are part of what it teaches.
    if _is_own(request, submission) or submission.is_example:
        return Download(f"submission-{submission.pk}-{submission.bundle_name}", None)
    try:
        download = public_download(submission)
    except FileNotFoundError:
        raise Http404("The bundle's file is gone.") from None
    if download is None:
        raise Http404("No such submission.")
    return download


def _is_own(request: HttpRequest, submission: Submission) -> bool:
    if request.user.is_staff:
        return True
    team = team_of(request.user)
    return team is not None and team.pk == submission.team_id


@require_safe
def problem_solutions(request: HttpRequest, slug: str) -> HttpResponse:
    """The passing bundles of a problem, public after the date its admins set."""
    problem = get_object_or_404(Problem.objects.published(), slug=slug)
    return render(
        request,
        "submissions/solutions.html",
        {"problem": problem, "results": problem_public_solutions(problem)},
    )
