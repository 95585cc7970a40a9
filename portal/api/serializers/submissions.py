"""Shapes of the API's submissions: results, artifacts, profiles offered (portal.submissions)."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from evaluator.face import ARTIFACT_CAP_BYTES, PROFILES
from portal.api.serializers.common import INTERVAL_HELP, TIMES
from portal.submissions.models import Artifact, ProblemResult, ResultRun, Submission


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
            "progress_phase",
        ]
        extra_kwargs = {
            "progress_phase": {
                "help_text": "What a running evaluation does now, as its host last said: "
                "`compiling` (each solution imported once), `judging`, or empty (not started, "
                "or a host that does not say)."
            }
        }


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
