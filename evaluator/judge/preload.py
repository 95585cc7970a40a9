"""Imported once by the forkserver that trusted rank processes fork from.

Judges and the reference's runners fork from a server that has imported torch and the
catalog once per worker, instead of each importing them anew (seconds per process on a
CPU host: a third pool must not make an evaluation slower). The server holds no secret
(it forks before a judge is told anything) and is made non-dumpable here, before any
bundle code runs, so code running as the same user cannot read or inject into it.
"""

from __future__ import annotations

import torch  # noqa: F401
import torch.distributed  # noqa: F401

import evaluator.candidate.runner  # noqa: F401
import evaluator.judge.rank  # noqa: F401
import problems.registry  # noqa: F401
from evaluator.host import sandbox

sandbox.not_dumpable()
