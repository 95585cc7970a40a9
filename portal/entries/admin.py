from __future__ import annotations

from django.contrib import admin

from portal.entries.models import Entry, EntryAttempt, EntrySample


class EntrySampleInline(admin.TabularInline):
    model = EntrySample
    extra = 0
    can_delete = False
    fields = ["number", "batch", "submission"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "team", "model_name", "samples_per_problem", "k", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "slug", "model_name", "team__name"]
    inlines = [EntrySampleInline]

    def get_readonly_fields(self, request, obj=None):
        # n and k are declared before the first sample and fixed after it: changing them
        # would change what the samples already sent estimate.
        if obj is not None and obj.samples.exists():
            return ["samples_per_problem", "k", "team"]
        return []


@admin.register(EntryAttempt)
class EntryAttemptAdmin(admin.ModelAdmin):
    list_display = ["entry", "problem", "number", "sample"]
    list_filter = ["entry"]
    readonly_fields = ["entry", "sample", "problem", "number"]
