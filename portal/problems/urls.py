from __future__ import annotations

from django.urls import path

from portal.problems import views

app_name = "problems"

urlpatterns = [
    path("", views.problem_list, name="list"),
    path("<slug:slug>/", views.problem_detail, name="detail"),
    path("<slug:slug>/<slug:filename>.py", views.problem_starter, name="starter"),
]
