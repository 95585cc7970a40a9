"""The page where a team's members create, list and revoke API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts.models import Membership
from portal.accounts.selectors import team_of
from portal.api.forms import TokenCreateForm
from portal.api.models import ApiToken
from portal.api.services import TokenError, api_token_create, api_token_revoke


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    team = team_of(request.user)
    if team is None:
        messages.info(request, "Create or join a team first: an API token acts for your team.")
        return redirect("accounts:team")
    form = TokenCreateForm(request.POST if request.method == "POST" else None)
    created, secret, status = None, None, 200
    if form.is_bound:
        status = 400
        if form.is_valid():
            try:
                created, secret = api_token_create(
                    user=request.user, name=form.cleaned_data["name"]
                )
            except TokenError as exc:
                form.add_error("name", str(exc))
            else:
                form, status = TokenCreateForm(), 201
    is_owner = Membership.objects.filter(
        user=request.user, team=team, role=Membership.Role.OWNER
    ).exists()
    context = {
        "team": team,
        "form": form,
        "created": created,
        "secret": secret,
        "tokens": ApiToken.objects.active().for_team(team).select_related("user"),
        "is_owner": is_owner,
        "site_url": request.build_absolute_uri("/").rstrip("/"),
    }
    response = render(request, "accounts/tokens.html", context, status=status)
    # The secret is on this page once: no cache, no back-button copy.
    add_never_cache_headers(response)
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    team = team_of(request.user)
    token = get_object_or_404(ApiToken.objects.active().filter(team=team), pk=pk)
    try:
        api_token_revoke(token=token, user=request.user)
    except TokenError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Token “{token.name}” ({token.prefix}…) revoked.")
    return redirect("tokens:list")
