"""The entries' API addresses, included under /api/ in the API's namespace."""

from __future__ import annotations

from django.urls import path

from portal.entries import api

urlpatterns = [
    path("entries/", api.EntryListCreate.as_view(), name="entries"),
    path("entries/<slug:slug>/", api.EntryDetail.as_view(), name="entry"),
    path("entries/<slug:slug>/samples/", api.EntrySamples.as_view(), name="entry-samples"),
    path(
        "entries/<slug:slug>/batches/<int:pk>/",
        api.EntryBatchDetail.as_view(),
        name="entry-batch",
    ),
    path(
        "entries/<slug:slug>/dataset/<str:fmt>/",
        api.EntryDataset.as_view(),
        name="entry-dataset",
    ),
    path("leaderboard/dataset/<str:fmt>/", api.BoardDataset.as_view(), name="board-dataset"),
]
