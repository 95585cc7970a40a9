from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_safe

from evaluator.face import PROFILES, get_profile
from portal.accounts.selectors import team_of
from portal.entries import export
from portal.entries.forms import EntryForm
from portal.entries.models import Entry, Kind
from portal.entries.selectors import entries_with_scores, entry_status
from portal.entries.services import EntryError, entry_register
from portal.leaderboard.views import board_arguments, profile_argument, who_argument
from portal.submissions.selectors import environment_facts


def _entry(slug: str) -> Entry:
    return get_object_or_404(Entry.objects.in_good_standing().select_related("team"), slug=slug)


def _kind_argument(request: HttpRequest) -> str | None:
    kind = request.GET.get("kind") or None
    if kind is not None and kind not in Kind.values:
        raise Http404("no such kind")
    return kind


@require_safe
def entry_list(request: HttpRequest) -> HttpResponse:
    profile = profile_argument(request)
    kind = _kind_argument(request)
    return render(
        request,
        "entries/list.html",
        {
            "scored": entries_with_scores(profile=profile, kind=kind),
            "profile": PROFILES[profile],
            "profiles": PROFILES.values(),
            "kind": kind,
            "kinds": Kind.choices,
            "team": team_of(request.user),
        },
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def entry_new(request: HttpRequest) -> HttpResponse:
    form = EntryForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                entry = entry_register(user=request.user, **form.cleaned_data)
            except EntryError as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("entries:detail", slug=entry.slug)
        status = 400
    return render(
        request, "entries/new.html", {"form": form, "team": team_of(request.user)}, status=status
    )


@require_safe
def entry_detail(request: HttpRequest, slug: str) -> HttpResponse:
    entry = _entry(slug)
    profile = profile_argument(request)
    state = entry_status(entry, profile=profile)
    team = team_of(request.user)
    return render(
        request,
        "entries/detail.html",
        {
            "entry": entry,
            "state": state,
            "profile": PROFILES[profile],
            "profiles": PROFILES.values(),
            "is_member": team is not None and team.pk == entry.team_id,
        },
    )


@require_safe
def entry_sample(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """A sample's public result page, with what it takes to re-run it: the problem
    versions, the hardware profile, the host's software and the evaluator's version."""
    entry = _entry(slug)
    sample = get_object_or_404(entry.samples.select_related("submission"), number=number)
    submission = sample.submission
    state = entry_status(entry, profile=submission.profile)
    attempts = [a for a in state.attempts if a.sample_number == number]
    environment = export.public_environment(submission.environment)
    return render(
        request,
        "entries/sample.html",
        {
            "entry": entry,
            "sample": sample,
            "submission": submission,
            "attempts": attempts,
            "profile": get_profile(submission.profile),
            "environment": environment_facts(environment),
            "evaluator_version": environment.get("evaluator"),
        },
    )


def _dataset(rows: list[dict], fmt: str, name: str) -> HttpResponse:
    if fmt not in export.MEDIA_TYPES:
        raise Http404("no such format")
    response = HttpResponse(export.encode(rows, fmt), content_type=export.MEDIA_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@require_safe
def entry_dataset(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    entry = _entry(slug)
    return _dataset(list(export.entry_rows([entry])), fmt, f"pkb-entry-{entry.slug}")


@require_safe
def board_dataset(request: HttpRequest, fmt: str) -> HttpResponse:
    """The board's dataset, for the same profile, category and rows as the board page."""
    profile, category = board_arguments(request)
    who = who_argument(request)
    rows = export.board_rows(profile=profile, category=category, who=who)
    name = "-".join(["pkb-board", profile, *([category] if category else []), who])
    return _dataset(rows, fmt, name)
