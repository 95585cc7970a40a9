from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "portal.leaderboard"
    label = "leaderboard"
