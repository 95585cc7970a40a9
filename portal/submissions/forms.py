from __future__ import annotations

from django import forms
from django.conf import settings

from portal.submissions.hardware import UnknownProfile, check_profile
from portal.submissions.models import Submission


class SubmissionForm(forms.Form):
    """The Submit page's and the API's upload: the same fields, the same words on refusal.

    Mode and profile are plain text checked here rather than choice fields, so that an
    unknown one is refused with the known ones named (a script's typo, `--mode rank`)."""

    bundle = forms.FileField(
        label="Bundle",
        help_text="A Python file, or a .zip / .tar.gz of them, one solution per problem.",
    )
    mode = forms.CharField(required=False, max_length=16)
    profile = forms.CharField(required=False, max_length=32)
    profile_case = forms.CharField(required=False, max_length=80)

    def clean_mode(self) -> str:
        mode = self.cleaned_data["mode"].strip() or Submission.Mode.RANKED
        if mode not in Submission.Mode.values:
            known = ", ".join(Submission.Mode.values)
            raise forms.ValidationError(f"Unknown mode {mode!r}; one of: {known}.")
        return mode

    def clean_profile(self) -> str:
        profile = self.cleaned_data["profile"].strip() or settings.PKB_SUBMISSION_PROFILE
        try:
            return check_profile(profile)
        except UnknownProfile as exc:
            raise forms.ValidationError(str(exc)) from None

    def cleaned_data_for_run(self) -> dict:
        """submission_create's arguments from a valid form."""
        names = ("mode", "profile", "profile_case")
        return {"upload": self.cleaned_data["bundle"], **{n: self.cleaned_data[n] for n in names}}

    def clean(self) -> dict:
        data = super().clean()
        case = (data.get("profile_case") or "").strip()
        data["profile_case"] = case
        if case and data.get("mode") not in (None, Submission.Mode.PROFILE):
            self.add_error("profile_case", "A case to profile is for profile runs only.")
        return data
