"""Shapes of the API's JSON. No logic: the values come from the selectors."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from evaluator.contract import ARTIFACT_CAP_BYTES
from evaluator.host.profiles import PROFILES
from portal.accounts.models import Membership, Team
from portal.leaderboard.scoring import RULE
from portal.leaderboard.selectors import ExampleRow
from portal.problems.models import Problem
from portal.submissions.models import Artifact, ProblemResult, ResultRun, Submission

# Times are plain numbers in microseconds here, the unit in each field's name; the site
# and pkb show them scaled, unit always written (portal/formats.py).
TIME_HELP = "Median per-call time, in microseconds (µs), summed over the cases."
REF_TIME_HELP = "The reference's, in microseconds (µs), timed beside it."
TIMES = {"time_us": {"help_text": TIME_HELP}, "ref_time_us": {"help_text": REF_TIME_HELP}}

INTERVAL_HELP = (
    "Confidence interval of the speedup (low, high), from reference and candidate timed in "
    "alternating rounds; null for results of hosts that did not report one."
)


class ProblemSerializer(serializers.ModelSerializer):
    category_label = serializers.CharField()
    url = serializers.HyperlinkedIdentityField(view_name="api:problem", lookup_field="slug")

    class Meta:
        model = Problem
        fields = [
            "slug",
            "url",
            "title",
            "category",
            "category_label",
            "signature",
            "description",
            "world_sizes",
            "dtypes",
            "version",
        ]


class ProblemDetailSerializer(ProblemSerializer):
    class Meta(ProblemSerializer.Meta):
        fields = [*ProblemSerializer.Meta.fields, "public_cases", "reference_source"]


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


class ResultRunSerializer(serializers.ModelSerializer):
    seed = serializers.CharField(
        help_text="Names the run's draw of inputs: hosts derive its seeds from it."
    )

    class Meta:
        model = ResultRun
        fields = [
            "judged_at",
            "seed",
            "problem_version",
            "status",
            "time_us",
            "ref_time_us",
            "speedup",
            "speedup_low",
            "speedup_high",
            "roofline",
            "flags",
        ]
        extra_kwargs = {"speedup_low": {"help_text": INTERVAL_HELP}, **TIMES}


class ProblemResultSerializer(serializers.ModelSerializer):
    problem = serializers.CharField(source="problem.slug")
    flagged = serializers.BooleanField(source="is_flagged")
    runs = ResultRunSerializer(
        many=True,
        read_only=True,
        help_text="Its judged runs, oldest first; with several, the numbers are their medians.",
    )

    class Meta:
        model = ProblemResult
        fields = [
            "problem",
            "status",
            "world_size",
            "message",
            "time_us",
            "ref_time_us",
            "speedup",
            "speedup_low",
            "speedup_high",
            "max_abs_err",
            "max_rel_err",
            "roofline",
            "flags",
            "flagged",
            "cases",
            "log",
            "run_count",
            "runs",
        ]
        extra_kwargs = {"speedup_low": {"help_text": INTERVAL_HELP}, **TIMES}

    def to_representation(self, instance):
        data = super().to_representation(instance)
        # Logs may echo the team's code: only the team and admins read them (the view says).
        if not self.context.get("show_logs"):
            data.pop("log", None)
        return data


class SubmissionLinksMixin(serializers.Serializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:submission")
    html_url = serializers.SerializerMethodField()

    def get_html_url(self, submission: Submission) -> str:
        path = reverse("submissions:detail", args=[submission.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


MODE_HELP = "What the host does with the bundle; only `ranked` runs count on any board: " + (
    "; ".join(f"`{mode}`: {text}" for mode, text in Submission.MODE_HELP.items())
)


class SubmissionSummarySerializer(SubmissionLinksMixin, serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    user = serializers.CharField(source="user.username")
    mode = serializers.ChoiceField(choices=Submission.Mode.choices, help_text=MODE_HELP)
    disqualified = serializers.BooleanField(
        source="is_disqualified", help_text="It, or its team, is disqualified: it never ranks."
    )

    class Meta:
        model = Submission
        fields = [
            "id",
            "url",
            "html_url",
            "team",
            "user",
            "bundle_name",
            "mode",
            "profile",
            "problems",
            "status",
            "reason",
            "disqualified",
            "disqualification_reason",
            "created_at",
            "finished_at",
            "progress_done",
            "progress_total",
            "current_problem",
        ]


class ArtifactSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField(
        help_text="Its download (the file as an attachment); null once retention deleted it."
    )
    html_url = serializers.SerializerMethodField(help_text="The same, for a browser session.")
    truncated = serializers.BooleanField(
        help_text=f"The host cut it at {ARTIFACT_CAP_BYTES // (1024 * 1024)} MiB: the rest is "
        "missing (a cut trace may not load whole)."
    )
    size = serializers.IntegerField(help_text="Bytes, as stored.")

    class Meta:
        model = Artifact
        fields = [
            "name",
            "media_type",
            "size",
            "truncated",
            "note",
            "created_at",
            "url",
            "html_url",
        ]

    def _link(self, artifact: Artifact, view: str) -> str | None:
        if not artifact.is_kept:
            return None
        path = reverse(view, args=[artifact.submission_id, artifact.name])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    def get_url(self, artifact: Artifact) -> str | None:
        return self._link(artifact, "api:submission-artifact")

    def get_html_url(self, artifact: Artifact) -> str | None:
        return self._link(artifact, "submissions:artifact")


class SubmissionSerializer(SubmissionSummarySerializer):
    """A submission with its per-problem results and where and how it ran."""

    results = ProblemResultSerializer(many=True)
    artifacts = ArtifactSerializer(
        many=True,
        help_text="Files its host made for the team (a profile run's per-rank traces and "
        "tables); a `.trace.json` opens in https://ui.perfetto.dev (Open trace file) or "
        "chrome://tracing.",
    )
    platform_fault = serializers.BooleanField(
        help_text="It failed through the platform's fault (a host lost again and again, no "
        "worker, the evaluator's own error), not the bundle's: it does not count against the "
        "team's quota."
    )

    class Meta(SubmissionSummarySerializer.Meta):
        fields = [
            *SubmissionSummarySerializer.Meta.fields,
            "bundle_sha256",
            "profile_case",
            "platform_fault",
            "attempts",
            "queued_at",
            "started_at",
            "host",
            "environment",
            "results",
            "artifacts",
        ]


class SubmissionCreateSerializer(serializers.Serializer):
    bundle = serializers.FileField(
        help_text="A Python file, or a .zip / .tar.gz of them, one `<problem-slug>.py` each."
    )
    mode = serializers.ChoiceField(
        choices=Submission.Mode.choices,
        required=False,
        default=Submission.Mode.RANKED,
        help_text=MODE_HELP + ". Each mode has its own quota (`GET /api/quota/`).",
    )
    profile = serializers.ChoiceField(
        choices=sorted(PROFILES),
        required=False,
        help_text="The hardware profile to judge it on (default: the site's); `GET "
        "/api/profiles/` says which have a worker connected. One without is accepted and "
        "waits (the reply's `notice` says so); an unknown one is a 400.",
    )
    profile_case = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Profile runs only: the public (dev) case to profile, as listed on the "
        "problem's page; empty: the host picks. Eval cases are never profiled.",
    )


class SubmissionCreatedSerializer(SubmissionSummarySerializer):
    notice = serializers.CharField(
        allow_null=True,
        help_text="Set when no worker of its profile is connected now: it waits until one is.",
    )

    class Meta(SubmissionSummarySerializer.Meta):
        fields = [*SubmissionSummarySerializer.Meta.fields, "notice"]


class ProfileOfferSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    workers = serializers.IntegerField(
        allow_null=True,
        help_text="Workers connected now; 0: a run waits until one connects; null: the site "
        "cannot tell (its broker is unreachable).",
    )
    is_default = serializers.BooleanField(help_text="Where a submission without one goes.")
    note = serializers.CharField()


class QuotaWindowSerializer(serializers.Serializer):
    window_s = serializers.IntegerField(source="seconds", help_text="3600 or 86400.")
    name = serializers.CharField(help_text='"in the last hour", "in the last 24 hours"')
    used = serializers.IntegerField(
        help_text="Runs of the mode kept in the window; a run that failed through the "
        "platform's fault does not count."
    )
    limit = serializers.IntegerField()
    next_at = serializers.DateTimeField(
        allow_null=True, help_text="When the next slot frees, while the window is full."
    )


class ModeQuotaSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=Submission.Mode.choices)
    windows = QuotaWindowSerializer(many=True, help_text="The windows with a limit.")
    summary = serializers.CharField(help_text='"3 of 20 ranked runs used in the last 24 hours"')
    refusal = serializers.CharField(
        allow_null=True, help_text="Why a run of this mode would be refused now; null: welcome."
    )


class QuotaSerializer(serializers.Serializer):
    modes = ModeQuotaSerializer(many=True)
    active = serializers.IntegerField(help_text="The team's runs queued or running now.")
    active_limit = serializers.IntegerField(help_text="Of all modes together.")


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
    time_us = serializers.FloatField(allow_null=True, help_text=TIME_HELP)
    ref_time_us = serializers.FloatField(allow_null=True, help_text=REF_TIME_HELP)
    roofline = serializers.FloatField(allow_null=True)
    reached_at = serializers.DateTimeField(allow_null=True)


class ProblemRankingRowSerializer(_ProblemResultColumns):
    rank = serializers.IntegerField()
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
    examples = ProblemExampleRowSerializer(
        many=True,
        help_text="The example bundles' best results, fastest first; never ranked (like the "
        "baseline, which is 1.0x by definition and not listed).",
    )


class TeamSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:team", lookup_field="slug")
    html_url = serializers.HyperlinkedIdentityField(
        view_name="leaderboard:team", lookup_field="slug"
    )
    member_count = serializers.IntegerField()

    class Meta:
        model = Team
        fields = ["slug", "url", "html_url", "name", "member_count", "created_at"]


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["username", "role", "joined_at"]


class TeamDetailSerializer(TeamSerializer):
    members = MemberSerializer(source="memberships", many=True)

    class Meta(TeamSerializer.Meta):
        fields = [*TeamSerializer.Meta.fields, "members"]


class OwnTeamSerializer(TeamDetailSerializer):
    """What members see of their own team: the invite code too, as on the Team page."""

    class Meta(TeamDetailSerializer.Meta):
        fields = [*TeamDetailSerializer.Meta.fields, "invite_code"]


class TokenInfoSerializer(serializers.Serializer):
    name = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_staff = serializers.BooleanField()
    team = serializers.CharField(allow_null=True)
    team_slug = serializers.CharField(allow_null=True)
    token = TokenInfoSerializer(allow_null=True, help_text="The token of this request, if any.")
