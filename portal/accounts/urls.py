from __future__ import annotations

from django.urls import path

from portal.accounts import views

app_name = "accounts"

urlpatterns = [
    path("accounts/signup/", views.signup, name="signup"),
    path("account/", views.account, name="account"),
    path("team/", views.team, name="team"),
    path("team/create/", views.team_create_view, name="team-create"),
    path("team/join/", views.team_join_view, name="team-join"),
    path("team/leave/", views.team_leave_view, name="team-leave"),
    path("team/invite/regenerate/", views.team_regenerate_invite_view, name="team-invite"),
    path(
        "team/members/<int:user_id>/remove/",
        views.team_remove_member_view,
        name="team-remove-member",
    ),
    path("team/members/<int:user_id>/owner/", views.team_transfer_view, name="team-transfer"),
]
