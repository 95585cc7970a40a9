from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from portal.api import views

app_name = "api"

urlpatterns = [
    path("problems/", views.ProblemList.as_view(), name="problems"),
    path("problems/<slug:slug>/", views.ProblemDetail.as_view(), name="problem"),
    path("leaderboard/", views.Leaderboard.as_view(), name="leaderboard"),
    path(
        "leaderboard/problems/<slug:slug>/",
        views.ProblemLeaderboard.as_view(),
        name="problem-leaderboard",
    ),
    path("submissions/", views.SubmissionListCreate.as_view(), name="submissions"),
    path("submissions/<int:pk>/", views.SubmissionDetail.as_view(), name="submission"),
    path(
        "submissions/<int:pk>/artifacts/<str:name>/",
        views.SubmissionArtifact.as_view(),
        name="submission-artifact",
    ),
    path(
        "submissions/<int:pk>/cancel/",
        views.SubmissionCancel.as_view(),
        name="submission-cancel",
    ),
    path("profiles/", views.Profiles.as_view(), name="profiles"),
    path("quota/", views.Quota.as_view(), name="quota"),
    path("teams/", views.TeamList.as_view(), name="teams"),
    path("teams/<slug:slug>/", views.TeamDetail.as_view(), name="team"),
    path("team/", views.OwnTeam.as_view(), name="own-team"),
    path("me/", views.Me.as_view(), name="me"),
    # Model and agent entries, their batches of samples and the results dataset.
    path("", include("portal.entries.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    # Any other address under /api/ ending in a slash: a JSON 404 like the API's own, not
    # the site's HTML page (`/api/teams/<not a slug>/` too). Without the slash, Django's
    # APPEND_SLASH redirect still applies.
    re_path(r"^[\s\S]*/$", views.not_found),
]
