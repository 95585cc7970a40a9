from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import get_template
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_safe

from evaluator.face import PROFILES
from portal.accounts.selectors import team_of
from portal.leaderboard import freshness
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
    listing = _listing(profile)
    team = team_of(request.user)
    mine = listing.solved_by(team.pk) if team else set()
    shown = [(cat, pid) for cat, pid in listing.order if category is None or cat == category]
    groups = [
        (Category(key), [listing.cards[pid][pid in mine] for _, pid in items])
        for key, items in groupby(shown, key=lambda item: item[0])
    ]
    present = {cat for cat, _ in listing.order}
    return render(
        request,
        "problems/list.html",
        {
            "groups": groups,
            "categories": [c for c in Category if c.value in present],
            "category": category,
            "profile": PROFILES[profile],
            "team": team,
        },
    )


@dataclass
class _Listing:
    """The problems list of a profile: published problems in catalog order and each one's
    card, rendered without and with the "your team" mark."""

    order: list[tuple[str, int]]  # (category, problem id)
    cards: dict[int, tuple[SafeString, SafeString]]
    solvers: dict[int, set[int]]

    def solved_by(self, team_id: int) -> set[int]:
        return {pid for pid, teams in self.solvers.items() if team_id in teams}


def _listing(profile: str) -> _Listing:
    """Memoised with the boards until problems or results change: 97 cards took about
    100 ms to render per request, and the page served 42 requests/s under 10 readers
    (docs/measurements/2026-11-28-leaderboard.md)."""
    return freshness.memoised(("problem-list", profile), lambda: _build_listing(profile))


def _build_listing(profile: str) -> _Listing:
    stats = problem_stats(profile=profile)
    problems = Problem.objects.published().in_catalog_order()
    card = get_template("problems/_card.html")
    listing = _Listing([], {}, {pid: found.solvers for pid, found in stats.items()})
    for problem in problems.only("id", "slug", "title", "category", "signature", "description"):
        problem.stats = stats.get(problem.pk)  # type: ignore[attr-defined]
        listing.order.append((problem.category, problem.pk))
        listing.cards[problem.pk] = (
            mark_safe(card.render({"p": problem, "mine": False})),
            mark_safe(card.render({"p": problem, "mine": True})),
        )
    return listing


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
