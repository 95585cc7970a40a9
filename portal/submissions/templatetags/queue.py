"""What a queued submission waits for, as its page says it."""

from __future__ import annotations

from django import template

from portal.ops import canaries, selectors
from portal.ops.canaries import HostReading
from portal.submissions import broker

register = template.Library()


@register.simple_tag
def worker_missing(profile: str) -> bool:
    """True when no worker of the hardware profile is connected (no heartbeat of one for
    three heartbeats); False when there is one, or when the broker cannot say."""
    return broker.worker_missing(profile)


@register.simple_tag
def canary_held_back(profile: str) -> list[HostReading]:
    """The profile's connected hosts when every one reads out of bounds (its canary), so
    none takes work; empty otherwise."""
    return canaries.held_back(profile)


@register.simple_tag
def queue_place(submission: object) -> str:
    """ "3rd in line" for a queued submission: submissions and re-runs of its profile
    queued before it go first."""
    return selectors.submission_queue_place(submission)  # type: ignore[arg-type]
