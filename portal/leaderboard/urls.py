from __future__ import annotations

from django.urls import path

from portal.leaderboard import views

app_name = "leaderboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("leaderboard/", views.home, name="leaderboard"),
    path("leaderboard/scoring/", views.about_scoring, name="scoring"),
    path("teams/<slug:slug>/", views.team_page, name="team"),
]
