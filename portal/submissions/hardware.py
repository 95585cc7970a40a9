"""The hardware profiles a team may submit to, and which have a worker connected now.

Every known profile is offered: a run on a profile with no worker waits in its queue (and
fails after PKB_NO_WORKER_WAIT_S without one, services/sweeper.py), which the offer says
before the upload. Workers come from their liveness keys in the broker, as on the queue
page (`broker.workers_connected`); a broker that cannot say makes no claim either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from evaluator.face import PROFILES, get_profile
from portal.submissions import broker


class UnknownProfile(ValueError):
    """A profile name that no host serves; the message names the known ones."""


@dataclass(frozen=True)
class ProfileOffer:
    name: str
    label: str
    workers: int | None  # connected now; None when the broker cannot say
    is_default: bool

    @property
    def note(self) -> str:
        if self.workers is None:
            return "cannot tell whether a worker is connected (broker unreachable)"
        if self.workers:
            return f"{self.workers} worker{'s' if self.workers > 1 else ''} connected"
        return "no worker connected: a run waits until one is"

    @property
    def waits(self) -> bool:
        return self.workers == 0


def check_profile(name: str) -> str:
    """`name` if a host can serve it, else UnknownProfile saying which can."""
    try:
        return get_profile(name).name
    except KeyError:
        raise UnknownProfile(
            f"Unknown hardware profile {name!r}; known: {', '.join(PROFILES)}."
        ) from None


def profile_offers() -> list[ProfileOffer]:
    """Every known profile with its connected workers, the site's default first; one look
    at the broker."""
    workers = broker.workers_connected(set(PROFILES))
    default = settings.PKB_SUBMISSION_PROFILE
    offers = [
        ProfileOffer(
            name,
            profile.label,
            None if workers is None else len(workers[name]),
            name == default,
        )
        for name, profile in PROFILES.items()
    ]
    return sorted(offers, key=lambda offer: not offer.is_default)


def waiting_notice(profile: str) -> str | None:
    """What to tell a team whose run was queued on a profile with no worker now."""
    if not broker.worker_missing(profile):
        return None
    minutes = max(1, round(settings.PKB_NO_WORKER_WAIT_S / 60))
    return (
        f"No {profile} worker ({get_profile(profile).label}) is connected now: the run waits "
        f"in its queue until one is, and fails if none comes within {minutes} min."
    )
