from __future__ import annotations

from django.urls import path

from portal.submissions import views

app_name = "submissions"

urlpatterns = [
    path("submit/", views.submit, name="submit"),
    path("submissions/<int:pk>/", views.submission_detail, name="detail"),
    path("submissions/<int:pk>/status/", views.submission_status, name="status"),
    path("submissions/<int:pk>/bundle/", views.submission_bundle, name="bundle"),
    path(
        "submissions/<int:pk>/artifacts/<str:name>/",
        views.submission_artifact,
        name="artifact",
    ),
    path("problems/<slug:slug>/solutions/", views.problem_solutions, name="solutions"),
]
