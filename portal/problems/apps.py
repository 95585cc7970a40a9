from django.apps import AppConfig


class ProblemsConfig(AppConfig):
    name = "portal.problems"
    label = "problems"
