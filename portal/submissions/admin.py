from __future__ import annotations

from django.contrib import admin, messages

from portal.submissions.models import ProblemResult, Submission
from portal.submissions.services import submission_cancel, submission_requeue


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


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "team",
        "user",
        "bundle_name",
        "profile",
        "status",
        "attempts",
        "host",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "profile"]
    search_fields = ["id", "team__name", "user__username", "bundle_name", "bundle_sha256"]
    list_select_related = ["team", "user"]
    date_hierarchy = "created_at"
    inlines = [ProblemResultInline]
    actions = ["requeue", "cancel"]
    # Status changes go through the services (compare-and-set, enqueue on commit).
    readonly_fields = [f.name for f in Submission._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Requeue selected submissions (new attempt)")
    def requeue(self, request, queryset):
        count = sum(
            submission_requeue(submission=s, reason=f"Requeued by {request.user}.")
            for s in queryset
        )
        self.message_user(request, f"{count} submission(s) requeued.", messages.SUCCESS)

    @admin.action(description="Cancel selected submissions")
    def cancel(self, request, queryset):
        count = sum(
            submission_cancel(submission=s, reason=f"Cancelled by {request.user}.")
            for s in queryset
        )
        self.message_user(request, f"{count} active submission(s) cancelled.", messages.SUCCESS)
