from __future__ import annotations

from django.urls import path

from portal.leaderboard import views

app_name = "leaderboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("leaderboard/", views.home, name="leaderboard"),
    path("teams/<slug:slug>/", views.team_page, name="team"),
]
