from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.leaderboard.reruns import problem_rerun_top
from portal.problems.models import Problem


class Command(BaseCommand):
    help = (
        "Judge the current top entries of problems again with fresh seeds; their boards "
        "rank them by the median of their judged runs."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slugs", nargs="*", help="problems (default: every published one)")
        parser.add_argument(
            "--top", type=int, default=settings.PKB_RERUN_TOP, help="entries per problem board"
        )

    def handle(self, *args, slugs: list[str], top: int, **options) -> None:
        if top <= 0:
            raise CommandError("--top must be positive")
        problems = Problem.objects.published().in_catalog_order()
        if slugs:
            problems = problems.filter(slug__in=slugs)
            missing = sorted(set(slugs) - set(problems.values_list("slug", flat=True)))
            if missing:
                raise CommandError(f"no published problem: {', '.join(missing)}")
        for problem in problems:
            queued = problem_rerun_top(
                problem=problem, top=top, reason="Judged again with fresh seeds (rerun_top)."
            )
            ids = ", ".join(f"#{r.submission_id}" for r in queued) or "none"
            self.stdout.write(f"{problem.slug}: re-runs queued for submissions {ids}")
