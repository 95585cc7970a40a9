"""What the boards keep between builds: each team's (and example's) sums per profile.

Building a board from the results took 2.4 s at 1,000 teams (docs/measurements/
2026-11-28-leaderboard.md): a window query over every judged result, then tens of thousands
of scores in Python. A board row's sums change only when that team's results, submissions
or standing change, so they are kept here, one row per profile and group, and only the
groups that changed are computed again (`portal/leaderboard/kept.py`). Database triggers
(`triggers.py`) leave a `StaleMark` for each changed group in the writer's own transaction,
so every writer is covered, as for the boards' version.
"""

from __future__ import annotations

from django.db import models


class KeptRow(models.Model):
    """One group's counted results on one profile, summed per category (scoring.Totals).

    Plain ids, not foreign keys: it is a cache that the marks keep, and deleting a team or
    a problem must not wait on it."""

    profile = models.CharField(max_length=32)
    team_id = models.BigIntegerField(null=True)  # None for an example's row
    label = models.CharField(max_length=80, blank=True)  # the example's label; "" for a team
    name = models.CharField(max_length=200)
    slug = models.CharField(max_length=80, blank=True)
    # Packed (kept.TOTALS, kept.SOLVED): the sums per category and over all, and the
    # counted results, by problem id, for the curves and the problems list.
    totals = models.BinaryField()
    counted = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["profile"])]


class StaleMark(models.Model):
    """A group whose kept rows are out of date: a team (`team_id`), an example (`label`),
    or, with neither, every group (a problem changed)."""

    team_id = models.BigIntegerField(null=True)
    label = models.CharField(max_length=80, blank=True, default="")
