"""A member who leaves a team, or is removed from it, loses that team's API tokens.

A receiver rather than a call in the team services: memberships also end in the admin (the
team page's inline) and by cascade, and the API app may know about accounts, not the other
way round.
"""

from __future__ import annotations

from django.db.models.signals import post_delete
from django.dispatch import receiver

from portal.accounts.models import Membership
from portal.api.services import api_tokens_revoke_for_member


@receiver(post_delete, sender=Membership, dispatch_uid="api-revoke-departed-member-tokens")
def revoke_tokens_of_a_departed_member(sender, instance: Membership, **kwargs) -> None:
    api_tokens_revoke_for_member(user_id=instance.user_id, team_id=instance.team_id)
