"""The worker's canary: same code judged against itself (`evaluator.judge.canary`) when
the worker starts, then every PKB_CANARY_INTERVAL_S between evaluations.

A reading out of bounds stops the worker taking ranked work until a later one, every
PKB_CANARY_RECHECK_S meanwhile, reads in bounds again; the modes that never count (test,
benchmark, profile: their own queue, `HardwareProfile.unranked_queue`) go on meanwhile, so
a team iterating is not held up by a clock no board reads. The first out-of-bounds reading
of a streak is taken again at once: a sound host reads out of bounds by chance about once
in a hundred readings (the intervals' coverage), and a second reading in a row is the
fault confirmed, not chance; only then does the worker wait out a recheck.

How it stops: the worker cancels its own consumer of a queue (what Celery's
`cancel_consumer` control does, for this worker alone), so messages stay in the queue for
other hosts, and one that was on its way here goes back to it (kombu requeues a message
for a cancelled queue); nothing is lost. While a reading is taken it consumes neither
queue, so nothing runs beside the canary; it starts consuming only after its first
reading. An evaluation is never interrupted: a canary that falls due during one stops the
worker taking the next, and runs when the running one (and any message already received)
is done.

The judging runs in a child process, `python -m evaluator.judge.canary`, so the worker's
main process keeps its event loop (heartbeats, visibility deadlines) meanwhile. Each
reading goes to `pkb:canary:<profile>:<worker>` (liveness.py) and to the log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from celery import bootsteps
from celery.worker import state as worker_state

from evaluator.contract import SANDBOX_FAULT
from evaluator.host import liveness
from evaluator.host.profiles import HardwareProfile, get_profile
from evaluator.host.settings import Settings, env_float, env_int
from evaluator.judge.canary import default_tolerance

log = logging.getLogger(__name__)

READING_VERSION = 1
DEFAULT_INTERVAL_S = 1800
DEFAULT_RECHECK_S = 300
# A GPU reading takes a minute at most (process groups, one bandwidth-bound case); past
# this the child is killed and the reading is a failure.
TIMEOUT_S = 900
TICK_S = 1.0
# Out-of-bounds readings in a row before the worker waits PKB_CANARY_RECHECK_S for the next.
CONFIRMING_READINGS = 2
# The command that judges; the reading goes to the file named after --out.
JUDGE = [sys.executable, "-m", "evaluator.judge.canary"]


@dataclass(frozen=True)
class CanaryPlan:
    interval_s: int  # 0: no canary, the worker consumes from the start
    recheck_s: int
    tolerance: float

    @property
    def ttl_s(self) -> int:
        """How long a reading is kept: a few of the longest waits for the next one."""
        return 3 * max(self.interval_s, self.recheck_s) + TIMEOUT_S


def canary_plan(env: Mapping[str, str], backend: str) -> CanaryPlan:
    """PKB_CANARY_* (settings.py's readers: a bad value stops the worker at start)."""
    return CanaryPlan(
        interval_s=env_int(env, "PKB_CANARY_INTERVAL_S", DEFAULT_INTERVAL_S, minimum=0),
        recheck_s=env_int(env, "PKB_CANARY_RECHECK_S", DEFAULT_RECHECK_S, minimum=1),
        tolerance=env_float(env, "PKB_CANARY_TOLERANCE", default_tolerance(backend), minimum=0.0),
    )


class Gate(Protocol):
    def pause(self) -> None: ...
    def resume(self, *, ranked: bool) -> None: ...


class ConsumerGate:
    """The worker's consumers of its profile's two queues: both off (a reading is due or
    being taken), or the unranked one on with the ranked one on or off."""

    def __init__(self, consumer: Any, profile: HardwareProfile) -> None:
        self.consumer, self.profile = consumer, profile

    def pause(self) -> None:
        # Also takes the queues out of those a reconnected consumer starts with.
        self.consumer.cancel_task_queue(self.profile.queue)
        self.consumer.cancel_task_queue(self.profile.unranked_queue)

    def resume(self, *, ranked: bool) -> None:
        self.consumer.add_task_queue(self.profile.unranked_queue)  # a no-op while consumed
        if ranked:
            self.consumer.add_task_queue(self.profile.queue)
        else:
            self.consumer.cancel_task_queue(self.profile.queue)


def busy() -> bool:
    """An evaluation runs here, or a message for one has been received."""
    return bool(worker_state.active_requests or worker_state.reserved_requests)


class Watch:
    """When the canary is due, whether the worker may take work, and the child judging."""

    def __init__(
        self,
        *,
        plan: CanaryPlan,
        profile: HardwareProfile,
        worker: str,
        broker: Callable[[], Any],
        scratch_dir: Path,
        is_busy: Callable[[], bool] = busy,
    ) -> None:
        self.plan, self.profile, self.worker = plan, profile, worker
        self.broker, self.scratch_dir, self.is_busy = broker, scratch_dir, is_busy
        self.due = time.monotonic()  # at start: no work before the first reading
        self.paused = True  # no work at all: a reading is due, being taken or retaken
        self.ranked = False  # ranked work too, when not paused: the last verdict in bounds
        self.out_since: float | None = None
        self.strikes = 0  # out-of-bounds readings in a row
        self.gate: Gate | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.folder: Path | None = None
        self.started = 0.0
        self.last: dict[str, Any] | None = None  # the last record published

    def attach(self, gate: Gate) -> None:
        """A (re)started consumer: it consumes exactly when the worker may take work."""
        self.gate = gate
        if self.paused:
            gate.pause()
        else:
            gate.resume(ranked=self.ranked)

    def tick(self) -> None:
        if self.child is not None:
            self._poll()
            return
        if fault_marked(self.scratch_dir):
            self.due = min(self.due, time.monotonic())  # read now: hold before more work
        if time.monotonic() < self.due or self.gate is None:
            return
        if not self.paused:
            self.paused = True
            self.gate.pause()
        if self.is_busy():
            return  # the evaluation ends first; no new one starts meanwhile
        self._start()

    def close(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        self._forget_child()

    def _start(self) -> None:
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="pkb-canary-", dir=self.scratch_dir))
        out = self.folder / "reading.json"
        command = [*JUDGE, "--out", str(out), "--tolerance", repr(self.plan.tolerance)]
        log.info("canary: judging same code against itself on %s", self.profile.name)
        self.started = time.monotonic()
        self.child = subprocess.Popen(command, stdin=subprocess.DEVNULL)

    def _poll(self) -> None:
        assert self.child is not None and self.folder is not None
        if self.child.poll() is None:
            if time.monotonic() - self.started < TIMEOUT_S:
                return
            self.child.kill()
            self.child.wait()
            reading = self._failure(f"the canary ran past {TIMEOUT_S} s")
        else:
            reading = self._read(self.folder / "reading.json", self.child.returncode)
        self._forget_child()
        self.conclude(reading)

    def _forget_child(self) -> None:
        self.child = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _read(self, path: Path, returncode: int) -> dict[str, Any]:
        try:
            reading = json.loads(path.read_text())
        except (OSError, ValueError):
            return self._failure(f"the canary exited with {returncode} and no reading")
        if not isinstance(reading, dict) or not isinstance(reading.get("in_bounds"), bool):
            return self._failure("the canary's reading is malformed")
        return reading

    def _failure(self, why: str) -> dict[str, Any]:
        return {"in_bounds": False, "tolerance": self.plan.tolerance, "error": why, "cases": []}

    def conclude(self, reading: dict[str, Any]) -> None:
        """Publish and log a reading (evaluator.judge.canary's JSON); in bounds, take work."""
        now = time.time()
        in_bounds = reading["in_bounds"]
        self.out_since = None if in_bounds else (self.out_since or now)
        self.strikes = 0 if in_bounds else self.strikes + 1
        wait_s = self.plan.interval_s if in_bounds else self.plan.recheck_s
        if not self.confirmed:
            wait_s = 0  # taken again at once: chance, or the fault confirmed
        self.due = time.monotonic() + wait_s
        record = {
            **reading,
            "version": READING_VERSION,
            "profile": self.profile.name,
            "worker": self.worker,
            "host": socket.gethostname(),
            "judged_at": now,
            "out_since": self.out_since,
            "next_at": now + wait_s,
            # Past this the portal shows no reading: the worker stopped judging.
            "stale_after": now + 3 * wait_s + TIMEOUT_S,
        }
        self._publish(record)
        self.last = record
        if sandbox_fault(reading):
            self._hold(record)
            return
        if self.confirmed:
            self.paused, self.ranked = False, in_bounds
            if self.gate is not None:
                self.gate.resume(ranked=in_bounds)
        if in_bounds:
            log.info("canary: same code reads %s: in bounds", describe(record))
        elif not self.confirmed:
            log.warning(
                "canary: same code reads %s: OUT OF BOUNDS (tolerance %s); reading again to "
                "confirm, no work meanwhile",
                describe(record),
                self.plan.tolerance,
            )
        else:
            log.warning(
                "canary: same code reads %s: OUT OF BOUNDS (tolerance %s), %d readings in a "
                "row; this worker takes no ranked work until a canary reads in bounds (next "
                "in %d s), unranked work meanwhile",
                describe(record),
                self.plan.tolerance,
                self.strikes,
                wait_s,
            )

    def _hold(self, record: Mapping[str, Any]) -> None:
        """No work of any kind: the sandbox its settings name cannot start here, so every
        evaluation would be a platform fault (the reading, on /queue/ and /health/, says
        why). A reading every PKB_CANARY_RECHECK_S lets work in once it starts again."""
        self.paused, self.ranked = True, False
        self.due = time.monotonic() + self.plan.recheck_s
        if self.gate is not None:
            self.gate.pause()
        log.error(
            "canary: %s; this worker takes no work until its sandbox starts (next try in %d s)",
            record.get("error"),
            self.plan.recheck_s,
        )

    @property
    def confirmed(self) -> bool:
        """The last reading's verdict stands: in bounds, or out of bounds in a row."""
        return self.strikes == 0 or self.strikes >= CONFIRMING_READINGS

    @property
    def decided(self) -> bool:
        """A reading has been taken and no retake to confirm it is pending."""
        return self.last is not None and self.child is None and self.confirmed

    def _publish(self, record: dict[str, Any]) -> None:
        key = liveness.canary_key(self.profile.name, self.worker)
        try:
            self.broker().set(key, json.dumps(record), ex=self.plan.ttl_s)
        except liveness.ERRORS as exc:
            # The decision is this worker's own; the portal merely shows no reading.
            log.warning("cannot publish the canary's reading: %s", exc)


# Left in the worker's scratch folder by an evaluation that met a sandbox fault (the task
# runs in a pool process; the watch, in the worker's main one, reads it at its next tick).
FAULT_MARK = "sandbox-fault"


def mark_fault(scratch_dir: Path) -> None:
    """An evaluation here met a sandbox fault: the canary reads at once, and holds all
    work while the fault lasts, instead of at its next interval (evaluations in between
    would each be a platform fault)."""
    with contextlib.suppress(OSError):
        scratch_dir.mkdir(parents=True, exist_ok=True)
        (scratch_dir / FAULT_MARK).touch()


def fault_marked(scratch_dir: Path) -> bool:
    """Whether an evaluation left the mark since the last tick (it is taken away)."""
    try:
        (scratch_dir / FAULT_MARK).unlink()
    except OSError:
        return False
    return True


def sandbox_fault(reading: Mapping[str, Any]) -> bool:
    """The reading failed because bundle code could not be confined as configured (the
    canary's candidate is the reference: no bundle can cause this)."""
    return SANDBOX_FAULT in str(reading.get("error") or "")


def describe(record: Mapping[str, Any]) -> str:
    if record.get("error"):
        return f"nothing ({record['error']})"
    return ", ".join(
        f"{c['case']} {c['median']:.2f}x ({c['low']:.2f}-{c['high']:.2f})"
        for c in record.get("cases", [])
    )


def consumer_step(
    settings: Callable[[], Settings], broker: Callable[[], Any]
) -> type[bootsteps.StartStopStep]:
    """The bootstep that runs the canary in a worker's consumer, for `tasks.py` to add."""

    class Canary(bootsteps.StartStopStep):
        name = "pkb.canary"
        # After the consumer of the task queues exists, before the event loop reads any.
        requires = ("celery.worker.consumer.tasks:Tasks",)

        def __init__(self, c: Any, **kwargs: Any) -> None:
            super().__init__(c, **kwargs)
            self.watch: Watch | None = None
            self.tref: Any = None

        def start(self, c: Any) -> None:
            if self.watch is None:
                own = settings()
                profile = get_profile(own.profile)
                plan = canary_plan(os.environ, profile.backend)
                if not plan.interval_s:
                    log.info("canary: off (PKB_CANARY_INTERVAL_S=0)")
                    return
                self.watch = Watch(
                    plan=plan,
                    profile=profile,
                    worker=c.hostname,
                    broker=broker,
                    scratch_dir=own.scratch_dir,
                )
            self.watch.attach(ConsumerGate(c, self.watch.profile))
            self.tref = c.timer.call_repeatedly(TICK_S, self.watch.tick, priority=10)

        def stop(self, c: Any) -> None:
            if self.tref is not None:
                self.tref.cancel()
                self.tref = None

        def shutdown(self, c: Any) -> None:
            self.stop(c)
            if self.watch is not None:
                self.watch.close()

    return Canary
