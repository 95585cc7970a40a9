"""What the curation actions of the admin share: a reason asked on an intermediate page,
and a log entry per object changed (Django's LogEntry: "Log entries" in the admin)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        max_length=2000,
        help_text="The team reads this on its team page and the submission's page.",
    )


def log_each(
    model_admin: admin.ModelAdmin, request: HttpRequest, objects: Iterable[Model], message: str
) -> None:
    for obj in objects:
        model_admin.log_change(request, obj, message)


def with_reason(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    action: str,
    title: str,
    apply: Callable[[Model, str], bool],
    done: str,
) -> TemplateResponse | None:
    """An admin action that asks for a reason first.

    The first POST (from the changelist) shows the form; the second, with `apply`, runs
    `apply(obj, reason)` on every selected object, logs each one it changed, and returns to
    the changelist.
    """
    form = ReasonForm(request.POST if "apply" in request.POST else None)
    if form.is_bound and form.is_valid():
        reason = form.cleaned_data["reason"].strip()
        changed = [obj for obj in queryset if apply(obj, reason)]
        log_each(model_admin, request, changed, f"{title}: {reason}")
        model_admin.message_user(request, done.format(count=len(changed)), messages.SUCCESS)
        return None
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": model_admin.model._meta,
        "form": form,
        "objects": list(queryset),
        "action": action,
        "action_checkbox_name": ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/curation/reason.html", context)
