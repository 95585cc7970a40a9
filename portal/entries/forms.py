from __future__ import annotations

from django import forms

from portal.entries.models import Kind


class EntryForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="Shown on the boards, e.g. GPT-9 (high).")
    slug = forms.SlugField(
        max_length=64,
        required=False,
        help_text="Its name in URLs and in `pkb submit --entry`; made from the name if empty.",
    )
    kind = forms.ChoiceField(choices=Kind.choices)
    model_name = forms.CharField(max_length=120)
    model_version = forms.CharField(max_length=120, required=False)
    harness = forms.CharField(max_length=200, required=False, label="Agent or harness")
    sampling = forms.CharField(
        max_length=300, required=False, help_text="e.g. temperature=0.8 top_p=0.95"
    )
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    evaluated_on = forms.DateField(required=False, help_text="YYYY-MM-DD; today if empty.")
    samples_per_problem = forms.IntegerField(
        min_value=1,
        label="Samples per problem (n)",
        help_text="Declared now and fixed: more samples of a problem are refused.",
    )
    k = forms.IntegerField(min_value=1, label="k of pass@k", help_text="At most n.")
