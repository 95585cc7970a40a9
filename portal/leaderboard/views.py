from __future__ import annotations

from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import get_template
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_safe

from evaluator.face import PROFILES
from portal.accounts.models import Team
from portal.accounts.selectors import team_members
from portal.leaderboard import charts
from portal.leaderboard.selectors import Board, Row, leaderboard, team_history, team_standing
from portal.problems.models import Category
from portal.submissions import broker

ROWS_PER_PAGE = 50


def profile_argument(request: HttpRequest, default: str | None = None) -> str:
    """The hardware profile asked for; an unknown one is a 404, not a silent default."""
    profile = request.GET.get("profile") or default or settings.PKB_SUBMISSION_PROFILE
    if profile not in PROFILES:
        raise Http404("no such profile")
    return profile


def board_arguments(request: HttpRequest) -> tuple[str, str | None]:
    """The profile and category asked for; unknown values are a 404, not a silent default."""
    profile = profile_argument(request)
    category = request.GET.get("category") or None
    if category is not None and category not in Category.values:
        raise Http404("no such category")
    return profile, category


def who_argument(request: HttpRequest) -> str:
    """Whose rows: people, models (model and agent entries) or all (the default)."""
    who = request.GET.get("who") or "all"
    if who not in WHO:
        raise Http404("no such choice of rows")
    return who


WHO = {"all": "All", "people": "People", "models": "Models and agents"}


def _switch_query(*, profile: str, category: str | None, who: str = "all") -> str:
    """The query string of a board: the default profile is left out, links stay short."""
    parts = [f"category={category}"] if category else []
    if profile != settings.PKB_SUBMISSION_PROFILE:
        parts.append(f"profile={profile}")
    if who != "all":
        parts.append(f"who={who}")
    return "?" + "&".join(parts) if parts else "?"


def _row_html(board: Board, row: Row) -> SafeString:
    """A board row's HTML, rendered once per memoised board."""
    html = board.fragments.get(id(row))
    if html is None:
        html = mark_safe(get_template("leaderboard/_row.html").render({"row": row, "board": board}))
        board.fragments[id(row)] = html
    return html


def _render_first_page(board: Board) -> None:
    """Most requests read the first page: its rows are rendered where the board is built,
    in the background after a change, rather than by the request that first shows it."""
    for row in board.rows[:ROWS_PER_PAGE]:
        _row_html(board, row)


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    profile, category = board_arguments(request)
    who = who_argument(request)
    board = leaderboard(profile=profile, category=category, prepare=_render_first_page, who=who)
    page = Paginator(board.rows, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    here = {"profile": profile, "category": category, "who": who}
    # A board whose hardware has no worker now gets no new results: its tab says so (one
    # look at the broker; nothing said when the broker cannot say).
    workers = broker.workers_connected(set(PROFILES))
    return render(
        request,
        "leaderboard/home.html",
        {
            "board": board,
            "page": page,
            "rows": [_row_html(board, row) for row in page.object_list],
            "profile": PROFILES[profile],
            "profile_links": [
                (p, _switch_query(**{**here, "profile": p.name}), workers and not workers[p.name])
                for p in PROFILES.values()
            ],
            "category_links": [
                (Category(c), _switch_query(**{**here, "category": c}))
                for c in board.categories_present
            ],
            "overall_link": _switch_query(**{**here, "category": None}),
            "column_links": [
                (col, _switch_query(**{**here, "category": col.value})) for col in board.columns
            ],
            "who_links": [
                (w, label, _switch_query(**{**here, "who": w})) for w, label in WHO.items()
            ],
            "who": who,
            "export_query": _switch_query(**here).lstrip("?"),
            "category": Category(category) if category else None,
            "page_query": _switch_query(**here).lstrip("?"),
            # CPU hosts measure no link bandwidth, so their results carry no roofline.
            "measures_links": PROFILES[profile].backend != "gloo",
        },
    )


@require_safe
def about_scoring(request: HttpRequest) -> HttpResponse:
    """How the boards score and rank, kept off the board itself so the table comes first."""
    return render(request, "leaderboard/about.html", {"profiles": PROFILES.values()})


@require_safe
def team_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A team's public page: members, best results, history, charts; never code or logs."""
    team = get_object_or_404(Team, slug=slug)
    history = team_history(team=team, viewer=request.user)
    # Where the team last submitted is where its results most likely are.
    profile = profile_argument(request, default=history[0].profile if history else None)
    standing = team_standing(team=team, profile=profile)
    return render(
        request,
        "leaderboard/team.html",
        {
            "team": team,
            "members": team_members(team),
            "history": history,
            "standing": standing,
            "profile": PROFILES[profile],
            "profiles": PROFILES.values(),
            "fast_1_chart": charts.timeline_chart(
                standing.fast_1_history, end=timezone.now(), label=f"fast_1 of {team.name}"
            ),
            "fast_p_chart": charts.fast_p_chart(standing.curve, label=team.name),
        },
    )
