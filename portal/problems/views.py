from __future__ import annotations

from itertools import groupby

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from evaluator.host.profiles import PROFILES
from portal.accounts.selectors import team_of
from portal.leaderboard.selectors import problem_board
from portal.leaderboard.views import profile_argument
from portal.problems.models import Category, Problem
from portal.problems.selectors import problem_stats
from portal.problems.timings import reference_timings


@require_safe
def problem_list(request: HttpRequest) -> HttpResponse:
    category = request.GET.get("category") or None
    if category not in Category.values:
        category = None
    profile = profile_argument(request)
    stats = problem_stats(profile=profile)
    team = team_of(request.user)
    problems = list(Problem.objects.published().in_category(category).in_catalog_order())
    for problem in problems:
        found = stats.get(problem.pk)
        problem.stats = found  # type: ignore[attr-defined]
        problem.mine = bool(team and found and team.pk in found.solvers)  # type: ignore[attr-defined]
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
            "profile": PROFILES[profile],
            "team": team,
        },
    )


def _tolerances(problem: Problem) -> list[tuple[str, float, float]]:
    """(dtype, atol, rtol) in the order of the problem's dtypes; 0 and 0 is exact."""
    found = problem.tolerances or {}
    return [
        (dtype, found.get(dtype, {}).get("atol", 0.0), found.get(dtype, {}).get("rtol", 0.0))
        for dtype in problem.dtypes
    ]


def _visible_problems(request: HttpRequest):
    # Staff preview a hidden or retired problem's page (the admin's "View on site") before
    # publishing it; everyone else gets the 404 an unknown slug gets.
    if request.user.is_staff:
        return Problem.objects.all()
    return Problem.objects.published()


@require_safe
def problem_detail(request: HttpRequest, slug: str) -> HttpResponse:
    problem = get_object_or_404(_visible_problems(request), slug=slug)
    profile = profile_argument(request)
    board = problem_board(problem=problem, profile=profile)
    timings = reference_timings(problem)
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
            "tolerances": _tolerances(problem),
            "timings": [t for t in timings if t.measured or t.bandwidth_gbps],
            "unmeasured": [t.profile for t in timings if not (t.measured or t.bandwidth_gbps)],
        },
    )


@require_safe
def problem_starter(request: HttpRequest, slug: str, filename: str) -> HttpResponse:
    """The starter `<slug>.py`, as a download: the reference made self-contained."""
    if filename != slug:
        raise Http404("the starter is named after its problem")
    problem = get_object_or_404(_visible_problems(request), slug=slug)
    response = HttpResponse(problem.starter_source, content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{problem.slug}.py"'
    return response
