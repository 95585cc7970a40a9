"""The entries' REST API: register, send a batch of samples, follow it, export the dataset."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluator.face import PROFILES
from portal.api.params import (
    CATEGORY_PARAMETER,
    ERROR,
    PROFILE_PARAMETER,
    WHO_PARAMETER,
    KnownQuery,
    Pagination,
    query_choice,
)
from portal.api.parsers import JSONParser
from portal.entries import export, serializers
from portal.entries.models import Entry, EntryBatch, Kind, Who
from portal.entries.selectors import entries_with_scores, entry_status
from portal.entries.services import EntryError, entry_register, entry_samples_submit
from portal.problems.models import Category

KIND_PARAMETER = OpenApiParameter("kind", OpenApiTypes.STR, enum=Kind.values)
_DATASET = OpenApiResponse(
    response=OpenApiTypes.BINARY,
    description="The results dataset as a file: text/csv, or Parquet "
    "(application/vnd.apache.parquet), one row per attempt of an entry and per counted "
    "result of a team; the columns are documented in docs/dataset.md and in the Parquet "
    "file's field metadata. Never another team's private data: only entries' samples and "
    "the results the boards show, no messages or logs, code only where the problem's "
    "solutions are public.",
)
# Either, by the path's format: each documented with its media type.
DATASET = {(200, media.split(";")[0]): _DATASET for media in export.MEDIA_TYPES.values()}
FORMAT_PARAMETER = OpenApiParameter(
    "fmt", OpenApiTypes.STR, OpenApiParameter.PATH, enum=sorted(export.MEDIA_TYPES)
)


def _profile(request: Request) -> str:
    return query_choice(request, "profile", PROFILES) or settings.PKB_SUBMISSION_PROFILE


def _entry(slug: str) -> Entry:
    entry = Entry.objects.in_good_standing().select_related("team").filter(slug=slug).first()
    if entry is None:
        raise NotFound(f"No entry {slug!r}.")
    return entry


class EntryListCreate(KnownQuery, APIView):
    query_parameters = ("profile", "kind")
    parser_classes = [JSONParser]
    permission_classes = [permissions.IsAuthenticatedOrReadOnly]
    pagination_class = Pagination

    @extend_schema(
        parameters=[PROFILE_PARAMETER, KIND_PARAMETER],
        responses={200: serializers.EntryListItemSerializer(many=True)},
        summary="Model and agent entries with their pass@k scores, best pass@1 first, "
        "a page at a time",
    )
    def get(self, request: Request) -> Response:
        kind = query_choice(request, "kind", Kind.values)
        # The order is by score, known only once every entry is scored (three queries
        # whatever their number); the page bounds what is serialized and sent.
        scored = entries_with_scores(profile=_profile(request), kind=kind)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(scored, request, view=self)
        data = [{"entry": e, "scores": s} for e, s in page]
        context = {"request": request}
        items = serializers.EntryListItemSerializer(data, many=True, context=context).data
        return paginator.get_paginated_response(items)

    @extend_schema(
        request=serializers.EntrySerializer,
        responses={
            201: serializers.EntrySerializer,
            # Each refused field with why, or `{"detail": "..."}` for a body that is no JSON.
            400: OpenApiResponse(
                response=OpenApiTypes.OBJECT,
                description='`{"field": ["why"]}`, `{"detail": ["why"]}` for a declaration '
                'refused as a whole, or `{"detail": "..."}` for a body that is not JSON.',
            ),
        },
        summary="Register a model or agent entry of your team, declaring n and k",
    )
    def post(self, request: Request) -> Response:
        form = serializers.EntrySerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            entry = entry_register(user=request.user, **form.validated_data)
        except EntryError as exc:
            raise ValidationError({"detail": [str(exc)]}) from None
        data = serializers.EntrySerializer(entry, context={"request": request}).data
        return Response(data, status=status.HTTP_201_CREATED)


class EntryDetail(KnownQuery, APIView):
    query_parameters = ("profile",)

    @extend_schema(
        parameters=[PROFILE_PARAMETER],
        responses={200: serializers.EntryStatusSerializer, 404: ERROR},
        summary="An entry: its samples, their progress and results, and its scores",
    )
    def get(self, request: Request, slug: str) -> Response:
        state = entry_status(_entry(slug), profile=_profile(request))
        return Response(serializers.EntryStatusSerializer(state, context={"request": request}).data)


class EntrySamples(KnownQuery, APIView):
    permission_classes = [permissions.IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request=serializers.SamplesUploadSerializer,
        responses={
            201: serializers.BatchSerializer,
            400: OpenApiResponse(description='`{"samples": ["why the batch was refused"]}`'),
            403: ERROR,
            404: ERROR,
        },
        summary="Send a batch of the entry's samples, one bundle each (all or none are kept)",
    )
    def post(self, request: Request, slug: str) -> Response:
        entry = _entry(slug)
        uploads = request.FILES.getlist("samples")
        try:
            batch = entry_samples_submit(user=request.user, entry=entry, uploads=uploads)
        except EntryError as exc:
            if "belongs to another team" in str(exc):
                raise PermissionDenied(str(exc)) from None
            raise ValidationError({"samples": [str(exc)]}) from None
        state = entry_status(entry, batch_id=batch.pk)
        data = serializers.BatchSerializer(state, context={"request": request}).data
        headers = {"Location": str(data["url"])}
        return Response(data, status=status.HTTP_201_CREATED, headers=headers)


class EntryBatchDetail(KnownQuery, APIView):
    @extend_schema(
        responses={200: serializers.BatchSerializer, 404: ERROR},
        summary="A batch of samples: its progress and results, and the entry's scores",
    )
    def get(self, request: Request, slug: str, pk: int) -> Response:
        entry = _entry(slug)
        batch = get_object_or_404(EntryBatch, entry=entry, pk=pk)
        state = entry_status(entry, batch_id=batch.pk)
        return Response(serializers.BatchSerializer(state, context={"request": request}).data)


def dataset_response(rows: list[dict], fmt: str, name: str) -> HttpResponse:
    if fmt not in export.MEDIA_TYPES:
        raise NotFound(f"No dataset format {fmt!r}: csv or parquet.")
    response = HttpResponse(export.encode(rows, fmt), content_type=export.MEDIA_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


class EntryDataset(KnownQuery, APIView):
    @extend_schema(
        parameters=[FORMAT_PARAMETER],
        responses={**DATASET, 404: ERROR},
        summary="An entry's results dataset: every attempt, CSV or Parquet",
    )
    def get(self, request: Request, slug: str, fmt: str) -> HttpResponse:
        entry = _entry(slug)
        return dataset_response(list(export.entry_rows([entry])), fmt, f"pkb-entry-{entry.slug}")


class BoardDataset(KnownQuery, APIView):
    query_parameters = ("profile", "category", "who")

    @extend_schema(
        parameters=[FORMAT_PARAMETER, PROFILE_PARAMETER, CATEGORY_PARAMETER, WHO_PARAMETER],
        responses={**DATASET, 404: ERROR},
        summary="A board's results dataset: its entries' attempts and its teams' counted "
        "results, CSV or Parquet",
    )
    def get(self, request: Request, fmt: str) -> HttpResponse:
        profile = _profile(request)
        category = query_choice(request, "category", Category.values)
        who = query_choice(request, "who", Who.values) or Who.ALL
        rows = export.board_rows(profile=profile, category=category, who=who)
        name = "-".join(["pkb-board", profile, *([category] if category else []), who])
        return dataset_response(rows, fmt, name)
