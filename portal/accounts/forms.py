from __future__ import annotations

from django import forms


class TeamCreateForm(forms.Form):
    name = forms.CharField(max_length=64, label="Team name")


class TeamJoinForm(forms.Form):
    invite_code = forms.CharField(max_length=32, label="Invite code")
