"""The REST API: thin views over the apps' selectors and services."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponseBase, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions, status
from rest_framework.exceptions import NotFound, Throttled, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluator.face import ARTIFACT_MEDIA_TYPES, PROFILES, did_you_mean
from portal.accounts.models import Team
from portal.accounts.selectors import team_of
from portal.api import serializers
from portal.api.models import ApiToken
from portal.api.params import (
    CATEGORY_PARAMETER,
    ERROR,
    PROFILE_PARAMETER,
    ROW_PAGE_PARAMETERS,
    WHO,
    WHO_PARAMETER,
    KnownQuery,
    Pagination,
    query_choice,
    row_page,
)
from portal.leaderboard.selectors import leaderboard, problem_board
from portal.problems.models import Category, Problem
from portal.submissions.downloads import artifact_of, artifact_response
from portal.submissions.forms import SubmissionForm
from portal.submissions.hardware import profile_offers, waiting_notice
from portal.submissions.models import Submission
from portal.submissions.quotas import team_submission_quota
from portal.submissions.services import SubmissionError, submission_cancel, submission_create


class ProblemList(KnownQuery, generics.ListAPIView):
    """Published problems, in catalog order."""

    serializer_class = serializers.ProblemSerializer
    pagination_class = Pagination
    queryset = Problem.objects.published().in_catalog_order()


def _published_problem(slug: str) -> Problem:
    """The published problem, or a 404 that names the closest published slugs (a typo in
    `pkb leaderboard --problem` should not send people to read all 97)."""
    try:
        return Problem.objects.published().get(slug=slug)
    except Problem.DoesNotExist:
        known = Problem.objects.published().values_list("slug", flat=True)
        raise NotFound(f"No published problem {slug!r}; {did_you_mean(slug, known)}") from None


class ProblemDetail(KnownQuery, generics.RetrieveAPIView):
    """A published problem with its reference source."""

    serializer_class = serializers.ProblemDetailSerializer
    queryset = Problem.objects.published()
    lookup_field = "slug"

    def get_object(self) -> Problem:
        problem = _published_problem(self.kwargs["slug"])
        self.check_object_permissions(self.request, problem)
        return problem


class Leaderboard(KnownQuery, APIView):
    query_parameters = ("profile", "category", "who", "limit", "offset")

    @extend_schema(
        parameters=[PROFILE_PARAMETER, CATEGORY_PARAMETER, WHO_PARAMETER, *ROW_PAGE_PARAMETERS],
        responses={200: serializers.BoardSerializer},
        summary="Teams ranked overall, or within one category (a page of rows)",
    )
    def get(self, request: Request) -> Response:
        profile = query_choice(request, "profile", PROFILES) or settings.PKB_SUBMISSION_PROFILE
        category = query_choice(request, "category", Category.values)
        who = query_choice(request, "who", WHO) or "all"
        board = leaderboard(profile=profile, category=category, who=who)
        page = row_page(request, board.rows)
        return Response(serializers.BoardSerializer({**vars(board), **page}).data)


class ProblemLeaderboard(KnownQuery, APIView):
    query_parameters = ("profile", "limit", "offset")

    @extend_schema(
        parameters=[PROFILE_PARAMETER, *ROW_PAGE_PARAMETERS],
        responses={200: serializers.ProblemRankingSerializer, 404: ERROR},
        summary="Teams ranked on one problem: best time, speedup and roofline fraction "
        "(a page of rows)",
    )
    def get(self, request: Request, slug: str) -> Response:
        profile = query_choice(request, "profile", PROFILES) or settings.PKB_SUBMISSION_PROFILE
        problem = _published_problem(slug)
        board = problem_board(problem=problem, profile=profile)
        data = {
            "problem": problem.slug,
            "profile": profile,
            **row_page(request, board.ranking),
            "examples": board.examples,
        }
        context = {"request": request}
        return Response(serializers.ProblemRankingSerializer(data, context=context).data)


def _form_errors(form: SubmissionForm) -> dict[str, list[str]]:
    return {
        field: [e["message"] for e in errors]
        for field, errors in form.errors.get_json_data().items()
    }


class SubmissionListCreate(KnownQuery, generics.ListCreateAPIView):
    """Your team's submissions, newest first; POST a bundle to submit one."""

    permission_classes = [permissions.IsAuthenticated]
    pagination_class = Pagination
    parser_classes = [MultiPartParser, FormParser]
    serializer_class = serializers.SubmissionSummarySerializer

    def get_queryset(self):
        team = team_of(self.request.user)
        if team is None:
            return Submission.objects.none()
        return Submission.objects.for_team(team).select_related("team", "user")

    @extend_schema(
        request=serializers.SubmissionCreateSerializer,
        responses={
            201: serializers.SubmissionCreatedSerializer,
            400: OpenApiResponse(
                description='`{"bundle": ["why the bundle was refused"]}`, or the same for '
                "`mode`, `profile` or `profile_case`"
            ),
            429: OpenApiResponse(
                description="The team's quota of the mode, or its runs at once; see Retry-After"
            ),
        },
        summary="Submit a bundle for your team: a test, benchmark, ranked or profile run",
    )
    def post(self, request: Request, *args, **kwargs) -> Response:
        # The web form's checks, then the same service: a bundle refused on the Submit page
        # is refused here with the same words.
        form = SubmissionForm(data=request.POST, files=request.FILES)
        if not form.is_valid():
            raise ValidationError(_form_errors(form))
        _check_quota(request, form.cleaned_data["mode"])
        try:
            submission = submission_create(user=request.user, **form.cleaned_data_for_run())
        except SubmissionError as exc:
            raise ValidationError({exc.field: [str(exc)]}) from None
        submission.notice = waiting_notice(submission.profile)
        data = serializers.SubmissionCreatedSerializer(
            submission, context=self.get_serializer_context()
        ).data
        # str(): the value is DRF's Hyperlink, a str subclass that strict WSGI servers refuse.
        headers = {"Location": str(data["url"])}
        return Response(data, status=status.HTTP_201_CREATED, headers=headers)


def _check_quota(request: Request, mode: str) -> None:
    """A team past its quota of the mode gets a 429 saying when to retry, where known.

    submission_create checks again (a 400 then, as on the web form): this early look is for
    clients, which can wait on a 429 but should not retry a 400.
    """
    team = team_of(request.user)
    if team is None:
        return
    quota = team_submission_quota(team)
    refusal = quota.refusal(mode)
    if refusal:
        raise Throttled(wait=quota.wait_s(mode), detail=refusal)


class Profiles(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        responses={200: serializers.ProfileOfferSerializer(many=True)},
        summary="The hardware profiles to submit to, and the workers connected to each now",
    )
    def get(self, request: Request) -> Response:
        offers = profile_offers()
        return Response(serializers.ProfileOfferSerializer(offers, many=True).data)


class Quota(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        responses={200: serializers.QuotaSerializer, 404: ERROR},
        summary="Your team's one budget: runs used per mode per hour and per day (entries' "
        "samples are ranked runs), runs at once, entries registered, next free slot",
    )
    def get(self, request: Request) -> Response:
        team = team_of(request.user)
        if team is None:
            raise Http404("You are in no team: create or join one on the Team page.")
        quota = team_submission_quota(team)
        data = {
            "modes": [
                {
                    "mode": mode,
                    "windows": quota[mode].windows,
                    "summary": quota[mode].summary,
                    "refusal": quota.refusal(mode),
                }
                for mode in Submission.Mode.values
            ],
            "active": quota.active,
            "active_limit": quota.active_limit,
            "entries": quota.entries,
            "entries_limit": quota.entries_limit,
        }
        return Response(serializers.QuotaSerializer(data).data)


def _visible_submissions(request: Request):
    # Other teams' submissions are a 404, as on the web pages: their ids are not a secret
    # worth confirming.
    return Submission.objects.visible_to(request.user).select_related("team", "user")


class SubmissionDetail(KnownQuery, generics.RetrieveAPIView):
    """A submission with its per-problem results (logs for its team and admins only)."""

    serializer_class = serializers.SubmissionSerializer
    permission_classes = [permissions.IsAuthenticated]

    def get_queryset(self):
        return _visible_submissions(self.request).prefetch_related(
            "results__problem", "results__runs", "artifacts"
        )

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        submission = self.get_object()
        context = {
            **self.get_serializer_context(),
            "show_logs": _may_read_logs(request, submission),
        }
        return Response(self.get_serializer_class()(submission, context=context).data)


def _may_read_logs(request: Request, submission: Submission) -> bool:
    if request.user.is_staff:
        return True
    team = team_of(request.user)
    return team is not None and team.pk == submission.team_id


# The file is served as its recorded media type, one of the contract's four (text with
# `; charset=utf-8`): each is documented, so that a client (and the schema fuzz) can hold
# the response's Content-Type to the schema.
ARTIFACT = {
    (200, media): OpenApiResponse(
        # A JSON artifact (a Chrome trace) is one JSON document; the others are text files.
        OpenApiTypes.OBJECT if media == "application/json" else OpenApiTypes.BINARY,
        description="The file, as an attachment of its recorded media type (JSON, CSV, "
        "plain text or Markdown).",
    )
    for media in ARTIFACT_MEDIA_TYPES
}


class SubmissionArtifact(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        responses={**ARTIFACT, 404: ERROR},
        summary="Download an artifact of your team's submission (a profile run's trace)",
    )
    def get(self, request: Request, pk: int, name: str) -> HttpResponseBase:
        submission = get_object_or_404(_visible_submissions(request), pk=pk)
        return artifact_response(artifact_of(submission, name))


class SubmissionCancel(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        request=None,
        responses={200: serializers.SubmissionSummarySerializer, 404: ERROR, 409: ERROR},
        summary="Cancel a queued or running submission of your team",
    )
    def post(self, request: Request, pk: int) -> Response:
        submission = get_object_or_404(_visible_submissions(request), pk=pk)
        reason = f"Cancelled by {request.user.get_username()}."
        cancelled = submission_cancel(submission=submission, reason=reason)
        submission.refresh_from_db()
        if not cancelled:
            return Response(
                {
                    "detail": f"Submission #{pk} is {submission.get_status_display().lower()}: "
                    "only a queued or running one can be cancelled."
                },
                status=status.HTTP_409_CONFLICT,
            )
        context = {"request": request}
        return Response(serializers.SubmissionSummarySerializer(submission, context=context).data)


def _teams():
    return Team.objects.with_member_count().order_by("name")


class TeamList(KnownQuery, generics.ListAPIView):
    """Every team, by name."""

    serializer_class = serializers.TeamSerializer
    pagination_class = Pagination
    queryset = _teams()


class TeamDetail(KnownQuery, generics.RetrieveAPIView):
    serializer_class = serializers.TeamDetailSerializer
    queryset = _teams().prefetch_related("memberships__user")
    lookup_field = "slug"


class OwnTeam(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses={200: serializers.OwnTeamSerializer, 404: ERROR}, summary="Your team")
    def get(self, request: Request) -> Response:
        team = team_of(request.user)
        if team is None:
            raise Http404("You are in no team: create or join one on the Team page.")
        team = _teams().prefetch_related("memberships__user").get(pk=team.pk)
        return Response(serializers.OwnTeamSerializer(team, context={"request": request}).data)


class Me(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        responses={200: serializers.MeSerializer},
        summary="Who the credentials belong to (the CLI checks a token with it)",
    )
    def get(self, request: Request) -> Response:
        team = team_of(request.user)
        token = request.auth if isinstance(request.auth, ApiToken) else None
        data = {
            "username": request.user.get_username(),
            "is_staff": request.user.is_staff,
            "team": team.name if team else None,
            "team_slug": team.slug if team else None,
            "token": token,
        }
        return Response(serializers.MeSerializer(data).data)


@csrf_exempt  # it changes nothing: a POST gets the 404, not a CSRF refusal
def not_found(request: HttpRequest, *args, **kwargs) -> JsonResponse:
    """No such API address, in the API's own JSON (whatever the method or credentials)."""
    return JsonResponse({"detail": "No such API address."}, status=404)
