"""Whose turn it is: which runner of a judge's rank may run while the other is timed.

A judge freezes each of its two runners for the other's whole side of a pair, where the
host gives a freezer: the candidate's (the cgroup of every process of its rank) while the
reference's rounds and tare run, so that nothing bundle code started can take the
reference's CPU while it is timed; the reference's the same way while the candidate's
rounds run, so that both come to their rounds alike. A side ends for every rank at once:
no judge thaws a runner before every judge has ended the side. No signal is sent to
either runner (judge/processes.py, `frozen`): the candidate must not be able to count
its turns by anything it could catch."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from evaluator.judge.processes import frozen


class Turns:
    def __init__(self, rank: int, world_size: int, meet: Callable[[], None]) -> None:
        self.rank, self.world_size = rank, world_size
        self.meet = meet  # returns once every judge has come to it (`Clock.meet`)
        # The cgroup of every process of each runner's rank; None where the host gives none.
        self.reference_freezer: str | None = None
        self.candidate_freezer: str | None = None

    def learn(self, payload: dict[str, Any]) -> None:
        """The runners' cgroups of every rank, as the pool sends them ("runners")."""
        freezers = payload.get("freezers") or {}
        self.reference_freezer = (freezers.get("reference") or [None] * self.world_size)[self.rank]
        self.candidate_freezer = (freezers.get("candidate") or [None] * self.world_size)[self.rank]

    def reference_side(self) -> contextlib.AbstractContextManager[None]:
        """The candidate's processes stand still while the reference's runner works (its
        rounds of a pair, or its tare): a process bundle code forked cannot steal the
        reference's CPU while the judge times it, in the runner's group or out of it. One
        freeze for the side, confirmed before its first round: a freeze per round would
        put the kernel's work of freezing inside the reference's timed rounds."""
        return self._side(self.candidate_freezer)

    def candidate_side(self) -> contextlib.AbstractContextManager[None]:
        """The reference's runner stands still while the candidate's works, as the
        candidate's does for the reference: both sides then come to their rounds alike,
        just thawed, with the other frozen. With only the candidate stopped and
        continued, whichever side went second read up to 4% slower when it was the
        candidate's, at most 1% when the reference's (same code, H100, 2026-11-26): a
        lean against the candidate that crossover blocks cannot cancel, being unequal."""
        return self._side(self.reference_freezer)

    @contextlib.contextmanager
    def _side(self, freezer: str | None) -> Iterator[None]:
        """One side of a pair with the other runner's rank frozen (`freezer`), thawed only
        once every judge's side has ended: each judge freezes its own rank's runner, and a
        judge that thawed its candidate as soon as its own reference's rounds ended would
        let that candidate's processes run, on the same host and perhaps on the same
        cores, while a slower rank's reference is still timed. A side that raised does not
        wait (its pair has failed; the pool puts the judges to rest or restarts them)."""
        with frozen(freezer):
            yield
            self.meet()
