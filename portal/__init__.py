"""The Django project of the leaderboard: teams, problems, submissions, rankings, API."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
