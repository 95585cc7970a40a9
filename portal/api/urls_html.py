from __future__ import annotations

from django.urls import path

from portal.api import views_html

app_name = "tokens"

urlpatterns = [
    path("", views_html.tokens, name="list"),
    path("<int:pk>/revoke/", views_html.token_revoke, name="revoke"),
]
