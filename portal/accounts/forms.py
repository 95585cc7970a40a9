from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    """A username, a password and, if they like, an email: for "your submission is judged"
    mail and password resets. One address per account, so a reset reaches one person."""

    email = forms.EmailField(
        required=False,
        help_text="Optional. For mail when your team's submissions are judged, and to reset "
        "your password.",
    )

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip()
        if email and get_user_model().objects.filter(email__iexact=email).exists():
            raise forms.ValidationError("An account already uses this address.")
        return email


class TeamCreateForm(forms.Form):
    name = forms.CharField(max_length=64, label="Team name")


class TeamJoinForm(forms.Form):
    invite_code = forms.CharField(max_length=32, label="Invite code")
