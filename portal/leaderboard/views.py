from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from evaluator.profiles import PROFILES
from portal.leaderboard.selectors import leaderboard
from portal.problems.models import Category, Problem


def board_arguments(request: HttpRequest) -> tuple[str, str | None]:
    """The profile and category asked for; unknown values are a 404, not a silent default."""
    profile = request.GET.get("profile") or settings.PKB_SUBMISSION_PROFILE
    category = request.GET.get("category") or None
    if profile not in PROFILES or (category is not None and category not in Category.values):
        raise Http404("no such profile or category")
    return profile, category


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    profile, category = board_arguments(request)
    board = leaderboard(profile=profile, category=category)
    present = set(Problem.objects.published().values_list("category", flat=True))
    return render(
        request,
        "leaderboard/home.html",
        {
            "board": board,
            # One group per category, unless it would repeat the headline columns.
            "show_groups": category is None and len(board.columns) > 1,
            "profile": PROFILES[profile],
            "profiles": PROFILES.values(),
            "categories": [c for c in Category if c.value in present],
            "category": Category(category) if category else None,
            "default_profile": settings.PKB_SUBMISSION_PROFILE,
        },
    )
