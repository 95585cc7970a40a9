"""Read stored results' speedups and intervals again from their stored pairs of rounds, by
the evaluator's current rule, without judging anything again
(portal/submissions/services/rescore.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from portal.submissions.services.rescore import rescore_all


class Command(BaseCommand):
    help = (
        "Recompute every passed run's speedup and interval from its stored pairs of rounds "
        "by the evaluator's current rule (crossover blocks, nominal 99% interval), and each "
        "result from its runs. Nothing is judged again."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would change; write nothing"
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        counts = rescore_all(dry_run=dry_run)
        verb = "would change" if dry_run else "changed"
        self.stdout.write(
            f"{counts.runs} runs {verb} ({counts.results} results); "
            f"{counts.unchanged} read and left as they were"
        )
