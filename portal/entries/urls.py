from __future__ import annotations

from django.urls import path

from portal.entries import views

app_name = "entries"

urlpatterns = [
    path("entries/", views.entry_list, name="list"),
    path("entries/new/", views.entry_new, name="new"),
    path("entries/<slug:slug>/", views.entry_detail, name="detail"),
    path("entries/<slug:slug>/samples/<int:number>/", views.entry_sample, name="sample"),
    path("entries/<slug:slug>/dataset.<str:fmt>", views.entry_dataset, name="export"),
    path("leaderboard/dataset.<str:fmt>", views.board_dataset, name="board-export"),
]
