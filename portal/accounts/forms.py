from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User

from portal.accounts.selectors import email_in_use
from portal.accounts.services import EMAIL_IN_USE


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
        if email and email_in_use(email):
            raise forms.ValidationError(EMAIL_IN_USE)
        return email


class EmailChangeForm(forms.Form):
    """A new address for the signed-in user (empty: none), with their current password.

    The password is asked even to add a first address: with an email, the account's
    password can be reset by mail, so a session left open would otherwise be enough to
    take the account over for good. Whether another account uses the address is the
    service's to say (user_change_email), where the write is.
    """

    email = forms.EmailField(
        required=False,
        max_length=254,
        label="Email",
        help_text="For mail each time your team's submissions are judged, and to reset a "
        "forgotten password from the login page. Leave it empty to have none.",
    )
    password = forms.CharField(
        label="Current password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, user: User, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["email"].initial = user.email

    def clean_email(self) -> str:
        email = get_user_model().objects.normalize_email(self.cleaned_data["email"].strip())
        if email == self.user.email:
            raise forms.ValidationError(
                "This is your email already." if email else "Type an address to add one."
            )
        return email

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            raise forms.ValidationError("This is not your current password.")
        return password


class TeamCreateForm(forms.Form):
    name = forms.CharField(max_length=64, label="Team name")


class TeamJoinForm(forms.Form):
    invite_code = forms.CharField(max_length=32, label="Invite code")
