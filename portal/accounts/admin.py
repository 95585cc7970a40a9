from __future__ import annotations

from django.contrib import admin, messages

from portal.accounts.models import Membership, Team
from portal.accounts.services import team_disqualify, team_reinstate
from portal.submissions.admin_actions import log_each, with_reason


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]
    readonly_fields = ["joined_at"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "member_count", "created_at", "disqualified"]
    list_filter = [("disqualified_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "slug", "memberships__user__username"]
    # Disqualification goes through the actions, which ask for a reason and log it.
    readonly_fields = ["created_at", "disqualified_at", "disqualification_reason"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]
    actions = ["disqualify", "reinstate"]

    def get_queryset(self, request):
        return super().get_queryset(request).with_member_count()

    @admin.display(description="Members", ordering="member_count")
    def member_count(self, team: Team) -> int:
        return team.member_count

    @admin.display(boolean=True, ordering="disqualified_at")
    def disqualified(self, team: Team) -> bool:
        return team.is_disqualified

    @admin.action(description="Disqualify selected teams (asks for a reason)")
    def disqualify(self, request, queryset):
        return with_reason(
            self,
            request,
            queryset,
            action="disqualify",
            title="Disqualify teams",
            apply=lambda team, reason: team_disqualify(team=team, reason=reason) or True,
            done="{count} team(s) disqualified: none of their results rank.",
        )

    @admin.action(description="Reinstate selected teams (undo a disqualification)")
    def reinstate(self, request, queryset):
        changed = [team for team in queryset if team_reinstate(team=team)]
        log_each(self, request, changed, "Reinstated (disqualification undone).")
        self.message_user(request, f"{len(changed)} team(s) reinstated.", messages.SUCCESS)
