from __future__ import annotations

from django import forms

from portal.api.services import TOKEN_NAME_MAX


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=TOKEN_NAME_MAX,
        help_text="Where it will be used, e.g. “laptop” or “CI”.",
    )
