"""The candidate's runner under torch.profiler (Kineto), in a profile run only.

The judge brackets one round: "profile" starts the profiler (CPU activity always, CUDA
activity on a GPU) and marks each call of `solution` with a `pkb.solution` range;
"profile-end" stops it and writes the Chrome trace into the file the evaluating process
made for this rank (`judge/profiling.py`). Nothing here is trusted: bundle code in this
process may replace any of it, and the trusted side reads the file as untrusted bytes
(`judge/traces.py`). Ranked and benchmark runs never send either command.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

ANNOTATION = "pkb.solution"


class Session:
    """A running profile of one rank's round: the profiler, the function it wraps, and
    where its trace goes."""

    def __init__(self, fn: Callable[..., Any], device: torch.device, trace: str) -> None:
        activities = [ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self.fn, self.trace = fn, trace
        self.profiler = profile(activities=activities)
        self.profiler.start()

    def annotated(self) -> Callable[..., Any]:
        fn = self.fn

        def call(**kwargs: Any) -> Any:
            with record_function(ANNOTATION):
                return fn(**kwargs)

        return call

    def finish(self) -> int:
        """Stop, write the trace into its file; the bytes written."""
        self.profiler.stop()
        # Kineto writes to a path of its choosing: a private folder (TMPDIR is the
        # candidate's own), whose file is then copied into the one made for this rank.
        with tempfile.TemporaryDirectory(prefix="pkb-trace-") as folder:
            written = Path(folder) / "trace.json"
            self.profiler.export_chrome_trace(str(written))
            flags = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with open(written, "rb") as source, open(os.open(self.trace, flags), "wb") as sink:
                shutil.copyfileobj(source, sink)
                return sink.tell()


def start(runner: Any, trace: str) -> dict[str, Any]:
    """Profile the runner's next round: `runner.fn` is marked until `finish`."""
    if runner.fn is None or runner.profiling is not None:
        raise RuntimeError("a profile before the load, or inside another")
    runner.profiling = Session(runner.fn, runner.device, trace)
    runner.fn = runner.profiling.annotated()
    return {"ok": True}


def finish(runner: Any) -> dict[str, Any]:
    session, runner.profiling = runner.profiling, None
    if session is None:
        raise RuntimeError("no profile is running")
    runner.fn = session.fn
    return {"ok": True, "bytes": session.finish()}
