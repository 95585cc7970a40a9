"""A team's quotas: runs of each mode per hour and per day, and evaluations at once.

Windows slide (the last hour, the last 24 hours): a run leaves its window an hour or a
day after it was submitted, which is when the next slot frees. Every run the team kept
counts, whatever its outcome (a refused bundle is not kept, so it costs nothing), except a
run that failed through the platform's fault (`Submission.platform_fault`: its host was
lost again and again, no worker came, the evaluator broke): the team did nothing wrong and
gets its slot back. The limits per mode are settings (`PKB_<MODE>_RUNS_PER_HOUR` and
`_PER_DAY`; ranked runs per day keep their older name, `PKB_SUBMISSIONS_PER_DAY`).

One budget per team, whatever queues the work: a model or agent entry's samples are ranked
runs of its team and count in its ranked windows and its runs at once like any upload (a
batch needs a slot for each of its samples), and a team registers at most
`PKB_MAX_ENTRIES_PER_TEAM` entries. GPU time is what the limits share out; an entry with a
budget of its own was a way round them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.accounts.models import Team
from portal.submissions.models import Submission

HOUR = timedelta(hours=1)
DAY = timedelta(hours=24)
WINDOW_NAMES = {HOUR: "in the last hour", DAY: "in the last 24 hours"}


def mode_limits(mode: str) -> dict[timedelta, int]:
    """The mode's limit per window; 0 is none (ranked runs have no hourly limit by default)."""
    name = mode.upper()
    per_day = (
        settings.PKB_SUBMISSIONS_PER_DAY
        if mode == Submission.Mode.RANKED
        else getattr(settings, f"PKB_{name}_RUNS_PER_DAY")
    )
    return {HOUR: getattr(settings, f"PKB_{name}_RUNS_PER_HOUR"), DAY: per_day}


def clock(moment: datetime, now: datetime) -> str:
    """14:05 UTC (in 2 h 5 min): the site's time zone, and how long that is from now."""
    local = timezone.localtime(moment)
    minutes = max(1, -(-int((moment - now).total_seconds()) // 60))  # rounded up
    wait = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
    day = "" if local.date() == timezone.localtime(now).date() else local.strftime("%b %-d ")
    return f"{day}{local:%H:%M} {local.tzname()} (in {wait})"


@dataclass(frozen=True)
class Window:
    span: timedelta
    used: int
    limit: int
    next_at: datetime | None  # when `used` drops below `limit`; None while below it

    @property
    def name(self) -> str:
        return WINDOW_NAMES[self.span]

    @property
    def seconds(self) -> int:
        return int(self.span.total_seconds())


@dataclass(frozen=True)
class ModeQuota:
    """A team's use of one mode's limits at one moment."""

    mode: str
    windows: tuple[Window, ...]  # the windows with a limit, shortest first
    now: datetime

    @property
    def label(self) -> str:
        return Submission.Mode(self.mode).label.lower()

    @property
    def full(self) -> Window | None:
        """The window that holds the next run back longest; None when one is welcome."""
        full = [w for w in self.windows if w.next_at is not None]
        return max(full, key=lambda w: w.next_at or self.now) if full else None

    @property
    def next_at(self) -> datetime | None:
        full = self.full
        return full.next_at if full else None

    @property
    def summary(self) -> str:
        """'3 of 20 ranked runs used in the last 24 hours', each window with a limit."""
        if not self.windows:
            return f"{self.label} runs: no limit"
        first, *rest = self.windows
        text = f"{first.used} of {first.limit} {self.label} runs used {first.name}"
        text += "".join(f", {w.used} of {w.limit} {w.name}" for w in rest)
        if self.next_at is not None:
            text += f"; next at {clock(self.next_at, self.now)}"
        return text

    def refusal(self) -> str | None:
        full = self.full
        if full is None or full.next_at is None:
            return None
        return (
            f"Your team has used {full.used} of {full.limit} {self.label} runs {full.name}; "
            f"next at {clock(full.next_at, self.now)}."
        )


@dataclass(frozen=True)
class SubmissionQuota:
    """A team's quotas at one moment: each mode's, and evaluations at once (all modes)."""

    modes: dict[str, ModeQuota]
    active: int  # queued or running now, entries' samples included
    active_limit: int
    now: datetime
    entries: int = 0  # model and agent entries the team registered
    entries_limit: int = 0

    def __getitem__(self, mode: str) -> ModeQuota:
        return self.modes[mode]

    @property
    def active_summary(self) -> str:
        return f"At most {self.active_limit} queued or running at once ({self.active} now)."

    @property
    def entries_summary(self) -> str:
        return f"{self.entries} of {self.entries_limit} model or agent entries registered."

    @property
    def lines(self) -> list[str]:
        """One line per mode, then the runs at once and the entries: what the Submit and
        Team pages show."""
        modes = [f"{self.modes[m].summary}." for m in Submission.Mode.values]
        return [*modes, self.active_summary, self.entries_summary]

    @property
    def summary(self) -> str:
        return " ".join(self.lines)

    def refusal(self, mode: str = Submission.Mode.RANKED) -> str | None:
        """Why one more run of `mode` is refused now, or None when it is welcome."""
        refusal = self.modes[mode].refusal()
        if refusal:
            return refusal
        if self.active >= self.active_limit:
            return (
                f"Your team has {self.active} submissions queued or running, the most at once "
                f"({self.active_limit}); submit again when one of them has finished."
            )
        return None

    def batch_refusal(self, count: int) -> str | None:
        """Why a batch of `count` ranked runs (an entry's samples, queued together) is
        refused now, or None: each sample takes a slot of every ranked window and of the
        runs at once."""
        ranked = self.modes[Submission.Mode.RANKED]
        for window in ranked.windows:
            if window.used + count > window.limit:
                return (
                    f"Your team has used {window.used} of {window.limit} ranked runs "
                    f"{window.name}, entries' samples included; a batch of {count} would pass "
                    f"that. Send at most {max(0, window.limit - window.used)} now."
                )
        if self.active + count > self.active_limit:
            return (
                f"Your team has {self.active} runs queued or running and may have "
                f"{self.active_limit} at once, entries' samples included; a batch of {count} "
                f"would pass that. Send at most {max(0, self.active_limit - self.active)} now, "
                "the rest when they have finished."
            )
        return None

    def wait_s(self, mode: str) -> float | None:
        """Seconds until a refused run of `mode` may start (None: when a run finishes)."""
        next_at = self.modes[mode].next_at
        return None if next_at is None else max(1.0, (next_at - self.now).total_seconds())


def _window(times: list[datetime], span: timedelta, limit: int, now: datetime) -> Window:
    inside = [t for t in times if t >= now - span]  # `times` is sorted, oldest first
    used = len(inside)
    # The slot frees when enough of the oldest runs leave the window.
    next_at = inside[used - limit] + span if limit and used >= limit else None
    return Window(span, used, limit, next_at)


def team_submission_quota(team: Team, *, now: datetime | None = None) -> SubmissionQuota:
    """Every mode's use of its limits, the team's active runs and its entries; three
    queries. An entry's samples are the team's ranked runs and count as such."""
    now = now or timezone.now()
    times: dict[str, list[datetime]] = {mode: [] for mode in Submission.Mode.values}
    own = Submission.objects.for_team(team)
    rows = (
        own.created_since(now - DAY)
        .filter(platform_fault=False)
        .order_by("created_at")
        .values_list("mode", "created_at")
    )
    for mode, created_at in rows:
        times.setdefault(mode, []).append(created_at)
    modes = {
        mode: ModeQuota(
            mode,
            tuple(
                _window(times[mode], span, limit, now)
                for span, limit in mode_limits(mode).items()
                if limit
            ),
            now,
        )
        for mode in Submission.Mode.values
    }
    return SubmissionQuota(
        modes=modes,
        active=own.active().count(),
        active_limit=settings.PKB_MAX_ACTIVE_SUBMISSIONS,
        now=now,
        entries=team.entries.count(),  # related name of portal.entries' Entry.team
        entries_limit=settings.PKB_MAX_ENTRIES_PER_TEAM,
    )
