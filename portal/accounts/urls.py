from __future__ import annotations

from django.urls import path

from portal.accounts import views

app_name = "accounts"

urlpatterns = [
    path("accounts/signup/", views.signup, name="signup"),
    path("team/", views.team, name="team"),
    path("team/create/", views.team_create_view, name="team-create"),
    path("team/join/", views.team_join_view, name="team-join"),
    path("team/leave/", views.team_leave_view, name="team-leave"),
]
