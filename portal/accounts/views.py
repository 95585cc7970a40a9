from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts.forms import EmailChangeForm, SignupForm, TeamCreateForm, TeamJoinForm
from portal.accounts.models import Membership
from portal.accounts.selectors import team_members, team_of
from portal.accounts.services import (
    AccountError,
    TeamError,
    team_create,
    team_join,
    team_leave,
    team_regenerate_invite,
    team_remove_member,
    team_transfer_ownership,
    user_change_email,
)
from portal.submissions.models import Submission
from portal.submissions.quotas import team_submission_quota


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("accounts:team")
    form = SignupForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}. Create or join a team.")
        return redirect("accounts:team")
    return render(request, "accounts/signup.html", {"form": form})


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    """Who the user is (username, email, team), and their email to add, change or remove."""
    old_email = request.user.email
    form = EmailChangeForm(request.user, request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        try:
            user_change_email(user=request.user, email=form.cleaned_data["email"])
        except AccountError as exc:
            form.add_error("email", str(exc))
        else:
            messages.success(request, _email_changed_message(request.user.email, old_email))
            return redirect("accounts:account")
    context = {"form": form, "team": team_of(request.user)}
    return render(request, "accounts/account.html", context, status=400 if form.is_bound else 200)


def _email_changed_message(email: str, old_email: str) -> str:
    said = f"Your email is now {email}." if email else "Your account has no email now."
    if old_email and old_email.lower() != email.lower():
        said += f" A note of the change went to {old_email}."
    return said


def _team_page(request: HttpRequest, *, create_form=None, join_form=None, status=200):
    team = team_of(request.user)
    if team is not None and status != 200:
        # A member's page shows no create/join forms: tell them what went wrong up top.
        for form in (create_form, join_form):
            for errors in form.errors.values() if form else []:
                for error in errors:
                    messages.error(request, error)
        return redirect("accounts:team")
    members = team_members(team) if team else []
    context = {
        "team": team,
        "members": members,
        "is_owner": any(
            m.user_id == request.user.pk and m.role == Membership.Role.OWNER for m in members
        ),
        "quota": team_submission_quota(team) if team else None,
        "disqualified_submissions": (
            list(Submission.objects.for_team(team).disqualified()) if team else []
        ),
        "create_form": create_form or TeamCreateForm(),
        "join_form": join_form or TeamJoinForm(),
    }
    return render(request, "accounts/team.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def team(request: HttpRequest) -> HttpResponse:
    return _team_page(request)


@login_required
@require_POST
def team_create_view(request: HttpRequest) -> HttpResponse:
    form = TeamCreateForm(request.POST)
    if form.is_valid():
        try:
            created = team_create(owner=request.user, name=form.cleaned_data["name"])
        except TeamError as exc:
            form.add_error("name", str(exc))
        else:
            messages.success(request, f"Team {created.name} created. Share its invite code.")
            return redirect("accounts:team")
    return _team_page(request, create_form=form, status=400)


@login_required
@require_POST
def team_join_view(request: HttpRequest) -> HttpResponse:
    form = TeamJoinForm(request.POST)
    if form.is_valid():
        try:
            joined = team_join(user=request.user, invite_code=form.cleaned_data["invite_code"])
        except TeamError as exc:
            form.add_error("invite_code", str(exc))
        else:
            messages.success(request, f"You joined {joined.name}.")
            return redirect("accounts:team")
    return _team_page(request, join_form=form, status=400)


@login_required
@require_POST
def team_leave_view(request: HttpRequest) -> HttpResponse:
    try:
        team_leave(user=request.user)
    except TeamError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, "You left your team.")
    return redirect("accounts:team")


def _owner_action(request: HttpRequest, action, success: str) -> HttpResponse:
    """Run an owner's action; its TeamError (not the owner, not a teammate) is a message."""
    try:
        result = action()
    except TeamError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, success.format(result=result))
    return redirect("accounts:team")


@login_required
@require_POST
def team_remove_member_view(request: HttpRequest, user_id: int) -> HttpResponse:
    return _owner_action(
        request,
        lambda: team_remove_member(owner=request.user, member_id=user_id),
        "{result} is no longer in the team.",
    )


@login_required
@require_POST
def team_transfer_view(request: HttpRequest, user_id: int) -> HttpResponse:
    return _owner_action(
        request,
        lambda: team_transfer_ownership(owner=request.user, member_id=user_id),
        "{result} now owns the team.",
    )


@login_required
@require_POST
def team_regenerate_invite_view(request: HttpRequest) -> HttpResponse:
    return _owner_action(
        request,
        lambda: team_regenerate_invite(owner=request.user),
        "New invite code made; the old one no longer works.",
    )
