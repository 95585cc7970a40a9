from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages

from evaluator.face import PROFILES
from portal.leaderboard.reruns import problem_rerun_top
from portal.problems.models import Problem
from portal.problems.services import normalise_newlines, problems_set_status
from portal.submissions.admin_actions import log_each
from portal.submissions.services import problem_reevaluate


class ProblemForm(forms.ModelForm):
    profiles = forms.MultipleChoiceField(
        choices=[(p.name, p.label) for p in PROFILES.values()],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The hardware this problem is judged on; none ticked: all of them.",
    )

    class Meta:
        model = Problem
        fields = "__all__"
        help_texts = {
            name: "From the catalog; an edit here stays until the catalog changes this field "
            "(sync_problems names each edit it keeps or replaces)."
            for name in ("title", "category", "description")
        }

    def clean_description(self) -> str:
        # Browsers send a textarea's line breaks as CRLF; the catalog's are LF. Kept as sent,
        # an untouched description read as an admin's edit that sync_problems kept.
        return normalise_newlines(self.cleaned_data["description"])


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    form = ProblemForm
    list_display = [
        "title",
        "slug",
        "category",
        "status",
        "version",
        "weight",
        "hardware",
        "public_from",
        "updated",
    ]
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
        "profiles",
        "solutions_public_after",
        "description",
        "signature",
        "world_sizes",
        "dtypes",
        "version",
        "code_version",
        "reference_source",
        "updated_at",
    ]
    actions = ["publish", "hide", "retire", "reevaluate", "rerun_top"]

    def changelist_view(self, request, extra_context=None):
        # Ten columns and the filters beside them need the width Django's navigation
        # sidebar takes: with it, the last columns sat behind the table's scroll at 1280 px.
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="Hardware")
    def hardware(self, problem: Problem) -> str:
        return ", ".join(problem.profiles) or "all"

    # Dates, not full timestamps, and short headers: with the filters beside it, the list
    # ran 30 px past a 1280 px window (issue 40); the change form has the times.
    @admin.display(description="Solutions public", ordering="solutions_public_after")
    def public_from(self, problem: Problem) -> str:
        when = problem.solutions_public_after
        return when.date().isoformat() if when else "-"

    @admin.display(description="Updated", ordering="updated_at")
    def updated(self, problem: Problem) -> str:
        return problem.updated_at.date().isoformat()

    def _set_status(self, request, queryset, status: Problem.Status) -> None:
        changed = list(queryset.exclude(status=status))
        count = problems_set_status(problems=changed, status=status)
        log_each(self, request, changed, f"Status set to {status.label.lower()}.")
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

    @admin.action(
        description="Start over: judge every team's newest submission of selected problems "
        "from scratch (discards their results; after a version change)"
    )
    def reevaluate(self, request, queryset):
        total = 0
        for problem in queryset:
            reason = (
                f"Re-evaluated by {request.user}: {problem.slug} is at version {problem.version}."
            )
            requeued = problem_reevaluate(problem=problem, reason=reason)
            total += len(requeued)
            ids = ", ".join(f"#{pk}" for pk in requeued) or "none"
            self.log_change(request, problem, f"Re-evaluation queued: submissions {ids}.")
        self.message_user(request, f"{total} submission(s) queued again.", messages.SUCCESS)

    @admin.action(
        description="Add a run for the ranking: judge the top entries of selected problems "
        "again with fresh seeds (keeps their results)"
    )
    def rerun_top(self, request, queryset):
        top, total = settings.PKB_RERUN_TOP, 0
        for problem in queryset:
            reason = f"Judged again with fresh seeds for the ranking, by {request.user}."
            queued = problem_rerun_top(
                problem=problem, top=top, reason=reason, requested_by=request.user
            )
            total += len(queued)
            ids = ", ".join(f"#{r.submission_id}" for r in queued) or "none"
            self.log_change(request, problem, f"Re-runs of the top {top} queued: {ids}.")
        self.message_user(
            request,
            f"{total} re-run(s) queued; each board ranks by the median of the judged runs.",
            messages.SUCCESS,
        )
