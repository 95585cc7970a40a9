from __future__ import annotations

from dataclasses import dataclass

from portal.problems.models import Problem
from portal.submissions.models import ProblemResult, Submission


@dataclass(frozen=True)
class ResultLine:
    """One problem of a submission: its result, or None while it has none."""

    slug: str
    title: str
    result: ProblemResult | None


def submission_result_lines(submission: Submission) -> list[ResultLine]:
    """One line per problem of the bundle, in the bundle's order; two queries."""
    results = {r.problem.slug: r for r in submission.results.select_related("problem")}
    titles = dict(Problem.objects.filter(slug__in=submission.problems).values_list("slug", "title"))
    return [
        ResultLine(slug=slug, title=titles.get(slug, slug), result=results.get(slug))
        for slug in submission.problems
    ]


def team_recent_submissions(team, *, limit: int = 20) -> list[Submission]:
    return list(Submission.objects.for_team(team).select_related("user")[:limit])
