from __future__ import annotations

from django.contrib import admin

from portal.accounts.models import Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]
    readonly_fields = ["joined_at"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "member_count", "created_at"]
    search_fields = ["name", "slug", "memberships__user__username"]
    readonly_fields = ["created_at"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def get_queryset(self, request):
        return super().get_queryset(request).with_member_count()

    @admin.display(description="Members", ordering="member_count")
    def member_count(self, team: Team) -> int:
        return team.member_count
