from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from portal import views

urlpatterns = [
    path("", include("portal.leaderboard.urls")),
    path("problems/", include("portal.problems.urls")),
    path("", include("portal.submissions.urls")),
    path("", include("portal.entries.urls")),
    # Before accounts' urls, so that no team/<something>/ pattern there can shadow it.
    path("team/tokens/", include("portal.api.urls_html")),
    path("", include("portal.accounts.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Django's password reset, by email (an account without one cannot reset its password);
    # the templates are under templates/registration/.
    path(
        "accounts/password-reset/",
        auth_views.PasswordResetView.as_view(),
        name="password_reset",
    ),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/password-reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/password-reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("api/", include("portal.api.urls")),
    path("admin/", admin.site.urls),
    path("", include("portal.ops.urls")),  # health/, metrics, queue/
    path("favicon.ico", views.favicon),
]
# 404.html renders through Django's own view (with the request, for the header); the 500
# page must not depend on what may have failed.
handler500 = "portal.views.server_error"
