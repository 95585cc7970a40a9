from __future__ import annotations

from django import forms


class SubmissionForm(forms.Form):
    bundle = forms.FileField(
        label="Bundle",
        help_text="A Python file, or a .zip / .tar.gz of them, one solution per problem.",
    )
