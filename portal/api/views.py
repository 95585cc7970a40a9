from __future__ import annotations

from rest_framework import generics, permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import serializers
from portal.leaderboard.selectors import leaderboard
from portal.leaderboard.views import board_arguments
from portal.problems.models import Problem
from portal.submissions.models import Submission


class ProblemList(generics.ListAPIView):
    serializer_class = serializers.ProblemSerializer
    queryset = Problem.objects.published().in_catalog_order()


class ProblemDetail(generics.RetrieveAPIView):
    serializer_class = serializers.ProblemDetailSerializer
    queryset = Problem.objects.published()
    lookup_field = "slug"


class Leaderboard(APIView):
    def get(self, request: Request) -> Response:
        profile, category = board_arguments(request)
        board = leaderboard(profile=profile, category=category)
        return Response(serializers.BoardSerializer(board).data)


class SubmissionDetail(generics.RetrieveAPIView):
    serializer_class = serializers.SubmissionSerializer
    permission_classes = [permissions.IsAuthenticated]

    def get_queryset(self):
        # Other teams' submissions are a 404, as on the web pages: their ids are not a secret
        # worth confirming.
        return (
            Submission.objects.visible_to(self.request.user)
            .select_related("team", "user")
            .prefetch_related("results__problem")
        )
