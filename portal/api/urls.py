from __future__ import annotations

from django.urls import path

from portal.api import views

app_name = "api"

urlpatterns = [
    path("problems/", views.ProblemList.as_view(), name="problems"),
    path("problems/<slug:slug>/", views.ProblemDetail.as_view(), name="problem"),
    path("leaderboard/", views.Leaderboard.as_view(), name="leaderboard"),
    path("submissions/<int:pk>/", views.SubmissionDetail.as_view(), name="submission"),
]
