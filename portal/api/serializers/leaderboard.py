"""Shapes of the API's boards and per-problem rankings (portal.leaderboard)."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from portal.api.serializers.common import REF_TIME_HELP, TIME_HELP
from portal.leaderboard.scoring import RULE
from portal.leaderboard.selectors import ExampleRow

PAGE_HELP = (
    "Rows in all; `rows` holds those from `offset`, at most `limit` of them (ask for the "
    "next page with ?offset=offset+limit)."
)


class ScoreSerializer(serializers.Serializer):
    solved = serializers.IntegerField(
        help_text="Problems solved (fast_0 as a count, unweighted: see the board's weighted)."
    )
    faster = serializers.IntegerField(
        help_text="Problems faster than the reference beyond noise (fast_1 as a count, unweighted)."
    )
    fast_0 = serializers.FloatField(help_text="Weighted share of the problems solved.")
    fast_1 = serializers.FloatField(
        help_text="... solved with the speedup's interval wholly above 1 (its lower end; the "
        "speedup itself for results of hosts that report no interval)."
    )
    fast_2 = serializers.FloatField(help_text="... with the interval wholly above 2.")
    geomean = serializers.FloatField(
        allow_null=True, help_text="Of the counted (pooled median) speedups of the solved problems."
    )
    roofline = serializers.FloatField(allow_null=True, help_text="Mean fraction of link limit.")
    total = serializers.IntegerField(help_text="Published problems in scope.")


class ColumnSerializer(serializers.Serializer):
    value = serializers.CharField()
    label = serializers.CharField()
    total = serializers.IntegerField()


class RowSerializer(serializers.Serializer):
    rank = serializers.IntegerField(
        allow_null=True, help_text="The place in the board's order; null for untaken rows."
    )
    rank_low = serializers.IntegerField(
        allow_null=True,
        help_text="The best place the team's score could take within the speedups' intervals.",
    )
    rank_high = serializers.IntegerField(
        allow_null=True,
        help_text="The worst such place; equal to rank_low where the rank is settled.",
    )
    rank_range = serializers.CharField(
        allow_null=True,
        help_text='"rank_low-rank_high" (e.g. "2-4") where scores are not separable; else null.',
    )
    team = serializers.CharField(source="team_name")
    team_slug = serializers.CharField()
    is_baseline = serializers.BooleanField()
    is_example = serializers.BooleanField(
        help_text="An example bundle's row: shown beside the ranking, never ranked (rank null)."
    )
    label = serializers.CharField(
        allow_null=True, help_text="The example's public label; null for other rows."
    )
    entry = serializers.CharField(
        source="entry_slug",
        help_text="A model or agent entry's slug (`team` is then its name, `team_slug` its "
        "team's); empty for other rows. Its score is that of one sample per problem: fast_1 "
        "is fast_1@1, fast_0 pass@1, solved and faster the expected counts, rounded.",
    )
    entry_kind = serializers.CharField(help_text='"model" or "agent"; empty for other rows.')
    score = ScoreSerializer()
    categories = ScoreSerializer(many=True)
    reached_at = serializers.DateTimeField(allow_null=True)
    roofline = serializers.FloatField(allow_null=True)
    curve = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2),
        help_text="The fast_p curve's corners, [p, share], for p from 0 to 4.",
    )


class BoardSerializer(serializers.Serializer):
    profile = serializers.CharField()
    category = serializers.CharField(allow_null=True)
    columns = ColumnSerializer(many=True)
    weighted = serializers.BooleanField(
        help_text="Some problem in scope weighs other than 1: the fast_p shares are weighted "
        "by the problems' weights and no longer equal the counts (solved, faster) over total."
    )
    rows = RowSerializer(many=True, help_text=RULE)
    count = serializers.IntegerField(help_text=PAGE_HELP)
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()


class _ProblemResultColumns(serializers.Serializer):
    """What a team's row and an example's row of a problem's table both show."""

    speedup = serializers.FloatField(
        allow_null=True,
        help_text="The counted speedup: the team's newest code's, the median over every "
        "judged run of that code.",
    )
    speedup_low = serializers.FloatField(
        allow_null=True,
        help_text="The medians over the same runs of their intervals' ends; null for results "
        "of hosts that did not report one.",
    )
    speedup_high = serializers.FloatField(allow_null=True)
    run_count = serializers.IntegerField(
        help_text="Judged runs of the code the numbers are medians of."
    )
    is_faster = serializers.BooleanField(
        help_text="Faster than the reference beyond noise: speedup_low (or, without an "
        "interval, the speedup) above 1."
    )
    time_us = serializers.FloatField(allow_null=True, help_text=TIME_HELP)
    ref_time_us = serializers.FloatField(allow_null=True, help_text=REF_TIME_HELP)
    roofline = serializers.FloatField(allow_null=True)
    reached_at = serializers.DateTimeField(allow_null=True)


class ProblemRankingRowSerializer(_ProblemResultColumns):
    rank = serializers.IntegerField(
        help_text="The place in the problem's order: by speedup_low (the speedup without one)."
    )
    rank_low = serializers.IntegerField(
        help_text="The best place the result could take within the speedups' intervals."
    )
    rank_high = serializers.IntegerField(
        help_text="The worst such place; equal to rank_low where the rank is settled."
    )
    rank_range = serializers.CharField(
        allow_null=True,
        help_text='"rank_low-rank_high" (e.g. "2-3") where results are not separable; else null.',
    )
    team = serializers.CharField(source="team_name")
    team_slug = serializers.CharField()


class ProblemExampleRowSerializer(_ProblemResultColumns):
    is_example = serializers.BooleanField(default=True, help_text="Always true.")
    label = serializers.CharField(help_text="The example's public label.")
    source_url = serializers.SerializerMethodField(
        help_text="The example's bundle: examples are public code."
    )

    def get_source_url(self, row: ExampleRow) -> str | None:
        if row.submission_id is None:
            return None
        path = reverse("submissions:bundle", args=[row.submission_id])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class ProblemRankingSerializer(serializers.Serializer):
    problem = serializers.CharField()
    profile = serializers.CharField()
    rows = ProblemRankingRowSerializer(many=True)
    count = serializers.IntegerField(help_text=PAGE_HELP)
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    examples = ProblemExampleRowSerializer(
        many=True,
        help_text="The example bundles' best results, fastest first; never ranked (like the "
        "baseline, which is 1.0x by definition and not listed).",
    )
