from __future__ import annotations

from itertools import groupby

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from evaluator.host.profiles import PROFILES
from portal.leaderboard.selectors import problem_board
from portal.leaderboard.views import profile_argument
from portal.problems.models import Category, Problem


@require_safe
def problem_list(request: HttpRequest) -> HttpResponse:
    category = request.GET.get("category") or None
    if category not in Category.values:
        category = None
    problems = Problem.objects.published().in_category(category).in_catalog_order()
    groups = [
        (Category(key), list(items)) for key, items in groupby(problems, key=lambda p: p.category)
    ]
    present = Problem.objects.published().values_list("category", flat=True).distinct()
    categories = [c for c in Category if c.value in set(present)]
    return render(
        request,
        "problems/list.html",
        {
            "groups": groups,
            "categories": categories,
            "category": category,
        },
    )


@require_safe
def problem_detail(request: HttpRequest, slug: str) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.published(), slug=slug)
    profile = profile_argument(request)
    board = problem_board(problem=problem, profile=profile)
    return render(
        request,
        "problems/detail.html",
        {
            "problem": problem,
            "ranking": board.ranking,
            "examples": board.examples,
            # Teams, the reference and examples, each where its speedup puts it.
            "entries": board.entries,
            "profile": PROFILES[profile],
            "profiles": PROFILES.values(),
        },
    )
