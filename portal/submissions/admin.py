from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from portal.ops.selectors import queue_rows
from portal.submissions import broker
from portal.submissions.admin_actions import log_each, with_reason
from portal.submissions.models import (
    ActiveSubmission,
    Artifact,
    ProblemResult,
    Rerun,
    Submission,
)
from portal.submissions.services import (
    rerun_queue,
    submission_cancel,
    submission_disqualify,
    submission_reinstate,
    submission_requeue,
)
from portal.submissions.services.review import submission_review_clear


class ProblemResultInline(admin.TabularInline):
    model = ProblemResult
    extra = 0
    can_delete = False
    fields = [
        "problem",
        "status",
        "message",
        "speedup",
        "time_us",
        "ref_time_us",
        "max_abs_err",
        "max_rel_err",
        "roofline",
        "flags",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class ArtifactInline(admin.TabularInline):
    """A host's files for the team; staff download them from the submission's page."""

    model = Artifact
    extra = 0
    can_delete = False
    fields = ["download", "media_type", "size", "truncated", "note", "created_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="File")
    def download(self, artifact: Artifact) -> str:
        if not artifact.is_kept:
            return f"{artifact.name} (deleted)"
        url = reverse("submissions:artifact", args=[artifact.submission_id, artifact.name])
        return format_html('<a href="{}">{}</a>', url, artifact.name)


class SubmissionActions:
    """Requeue, cancel, disqualify and reinstate, each through its service and logged.

    The two ways of judging a submission again read alike, so each action's name says what
    happens to the results: "Start over" discards them (a new attempt, as after a broken
    host), "Add a run" keeps them and adds one more judged run for the ranking.
    """

    actions = ["requeue", "rerun", "cancel", "disqualify", "reinstate", "clear_review"]

    @admin.action(
        description="Start over: judge selected submissions from scratch (discards their results)"
    )
    def requeue(self, request, queryset):
        reason = f"Started over by {request.user}."
        changed = [s for s in queryset if submission_requeue(submission=s, reason=reason)]
        log_each(self, request, changed, reason)
        self.message_user(
            request,
            f"{len(changed)} submission(s) started over; their results are replaced when judged.",
            messages.SUCCESS,
        )

    @admin.action(
        description="Add a run for the ranking: judge selected submissions again with fresh "
        "seeds (keeps their results)"
    )
    def rerun(self, request, queryset):
        reason = f"Judged again with fresh seeds, by {request.user}."
        queued = []
        for submission in queryset.filter(status=Submission.Status.DONE):
            for result in submission.results.select_related("problem"):
                rerun = rerun_queue(
                    submission=submission,
                    problem=result.problem,
                    reason=reason,
                    requested_by=request.user,
                )
                if rerun is not None:
                    queued.append(rerun)
                    self.log_change(request, submission, f"Re-run of {result.problem.slug} queued.")
        self.message_user(
            request,
            f"{len(queued)} re-run(s) queued; earlier runs are kept and the result ranks by "
            "the median of them all.",
            messages.SUCCESS,
        )

    @admin.action(description="Cancel selected submissions")
    def cancel(self, request, queryset):
        reason = f"Cancelled by {request.user}."
        changed = [s for s in queryset if submission_cancel(submission=s, reason=reason)]
        log_each(self, request, changed, reason)
        self.message_user(
            request, f"{len(changed)} active submission(s) cancelled.", messages.SUCCESS
        )

    @admin.action(description="Disqualify selected submissions (asks for a reason)")
    def disqualify(self, request, queryset):
        return with_reason(
            self,
            request,
            queryset,
            action="disqualify",
            title="Disqualify submissions",
            # Logged also when only the reason changes: the team sees the new one.
            apply=lambda s, reason: submission_disqualify(submission=s, reason=reason) or True,
            done="{count} submission(s) disqualified.",
        )

    @admin.action(description="Reinstate selected submissions (undo a disqualification)")
    def reinstate(self, request, queryset):
        changed = [s for s in queryset if submission_reinstate(submission=s)]
        log_each(self, request, changed, "Reinstated (disqualification undone).")
        self.message_user(request, f"{len(changed)} submission(s) reinstated.", messages.SUCCESS)

    @admin.action(
        description="Clear review: the precheck's findings were read and are fine (the "
        "results under review may rank)"
    )
    def clear_review(self, request, queryset):
        cleared = 0
        for submission in queryset:
            count = submission_review_clear(submission=submission, by=request.user)
            if count:
                cleared += count
                self.log_change(
                    request, submission, f"Review cleared by {request.user}: {count} result(s)."
                )
        self.message_user(
            request, f"{cleared} result(s) cleared of review; they may rank.", messages.SUCCESS
        )


class DisqualifiedFilter(admin.SimpleListFilter):
    title = "disqualified"
    parameter_name = "disqualified"

    def lookups(self, request, model_admin):
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(disqualified_at__isnull=self.value() == "no")
        return queryset


class ExampleFilter(admin.SimpleListFilter):
    title = "example"
    parameter_name = "example"

    def lookups(self, request, model_admin):
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.examples()
        if self.value() == "no":
            return queryset.filter(example_label="")
        return queryset


@admin.register(Submission)
class SubmissionAdmin(SubmissionActions, admin.ModelAdmin):
    list_display = [
        "id",
        "team",
        "user",
        "bundle_name",
        "mode",
        "profile",
        "status",
        "attempts",
        "host",
        "created_at",
        "finished_at",
        "platform_fault",
        "disqualified",
        "example_label",
    ]
    list_filter = ["status", "mode", "profile", "platform_fault", DisqualifiedFilter, ExampleFilter]
    search_fields = [
        "id",
        "team__name",
        "user__username",
        "bundle_name",
        "bundle_sha256",
        "example_label",
    ]
    list_select_related = ["team", "user"]
    date_hierarchy = "created_at"
    inlines = [ProblemResultInline, ArtifactInline]
    # Status changes go through the services (compare-and-set, enqueue on commit). The
    # example label is staff's to set or clear: a plain field that no service guards.
    readonly_fields = [f.name for f in Submission._meta.fields if f.name != "example_label"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(boolean=True, ordering="disqualified_at")
    def disqualified(self, submission: Submission) -> bool:
        return submission.disqualified_at is not None


@admin.register(ActiveSubmission)
class QueueAdmin(SubmissionActions, admin.ModelAdmin):
    """The queue: what waits, what runs where, and how long since its host spoke."""

    list_display = [
        "id",
        "team",
        "mode",
        "profile",
        "status",
        "host",
        "current_problem",
        "progress",
        "attempts",
        "heartbeat_age",
        "waiting",
    ]
    list_filter = ["status", "mode", "profile", "host"]
    list_select_related = ["team"]
    ordering = ["status", "host", "queued_at"]
    actions = ["requeue", "cancel"]
    readonly_fields = [f.name for f in Submission._meta.fields]

    def get_queryset(self, request):
        return super().get_queryset(request).active()

    def has_add_permission(self, request) -> bool:
        return False

    def changelist_view(self, request, extra_context=None):
        # Above the list: every evaluation per profile, re-runs for the ranking included
        # (they occupy hosts as submissions do but are listed under "Re-runs"), and the
        # hosts connected now.
        rows = queue_rows()
        workers = broker.workers_connected({row.profile for row in rows})
        context = {
            "queue_summary": [
                (row, None if workers is None else len(workers[row.profile])) for row in rows
            ],
            "queue_reruns": sum(row.reruns_queued + row.reruns_running for row in rows),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="Progress")
    def progress(self, submission: Submission) -> str:
        """As the submission's page says it: no count before its host has compiled."""
        if submission.status == Submission.Status.QUEUED:
            return "queued"
        if submission.progress_phase == "compiling":
            return "compiling"
        if not submission.progress_total:
            return "starting"
        return f"{submission.progress_done} / {submission.planned_count}"

    @admin.display(description="Heartbeat", ordering="heartbeat_at")
    def heartbeat_age(self, submission: Submission) -> str:
        if submission.heartbeat_at is None:
            return "-"
        return f"{_seconds(timezone.now() - submission.heartbeat_at)} ago"

    @admin.display(description="Queued for", ordering="queued_at")
    def waiting(self, submission: Submission) -> str:
        if submission.queued_at is None:
            return "-"
        return _seconds(timezone.now() - submission.queued_at)


def _seconds(delta) -> str:
    s = max(0, int(delta.total_seconds()))
    return f"{s} s" if s < 120 else f"{s // 60} min" if s < 7200 else f"{s // 3600} h"


@admin.register(Rerun)
class RerunAdmin(admin.ModelAdmin):
    """Re-runs for the ranking: asked for here through the problem and submission actions,
    or by the beat; each done one added a judged run to its submission's result."""

    list_display = ["id", "submission", "problem", "status", "host", "created_at", "finished_at"]
    list_filter = ["status", "problem"]
    list_select_related = ["submission__team", "problem"]
    search_fields = ["submission__id", "submission__team__name", "problem__slug"]
    readonly_fields = [f.name for f in Rerun._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(LogEntry)
class LogEntryAdmin(admin.ModelAdmin):
    """Every admin action, who did it and when: read-only, so the record stays whole."""

    list_display = ["action_time", "user", "content_type", "object_repr", "action", "message"]
    list_filter = ["action_flag", "content_type", "user"]
    search_fields = ["object_repr", "change_message", "user__username"]
    date_hierarchy = "action_time"
    list_select_related = ["user", "content_type"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Action", ordering="action_flag")
    def action(self, entry: LogEntry) -> str:
        return entry.get_action_flag_display()

    @admin.display(description="Message")
    def message(self, entry: LogEntry) -> str:
        return entry.get_change_message()
