from __future__ import annotations

from django.contrib import admin, messages

from portal.problems.models import Problem
from portal.problems.services import problems_set_status


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ["title", "slug", "category", "status", "version", "weight", "updated_at"]
    list_editable = ["status", "weight"]
    list_filter = ["status", "category"]
    search_fields = ["slug", "title"]
    readonly_fields = [
        "slug",
        "signature",
        "reference_source",
        "world_sizes",
        "dtypes",
        "version",
        "code_version",
        "updated_at",
    ]
    fields = [
        "slug",
        "title",
        "category",
        "status",
        "weight",
        "description",
        "signature",
        "world_sizes",
        "dtypes",
        "version",
        "code_version",
        "reference_source",
        "updated_at",
    ]
    actions = ["publish", "hide", "retire"]

    def _set_status(self, request, queryset, status: Problem.Status) -> None:
        count = problems_set_status(problems=queryset, status=status)
        self.message_user(
            request, f"{count} problem(s) now {status.label.lower()}.", messages.SUCCESS
        )

    @admin.action(description="Publish selected problems")
    def publish(self, request, queryset):
        self._set_status(request, queryset, Problem.Status.PUBLISHED)

    @admin.action(description="Hide selected problems")
    def hide(self, request, queryset):
        self._set_status(request, queryset, Problem.Status.HIDDEN)

    @admin.action(description="Retire selected problems")
    def retire(self, request, queryset):
        self._set_status(request, queryset, Problem.Status.RETIRED)
