"""Problems and solutions for the runner tests.

The problems are the real all-reduce under other slugs, each with one small case, so that
one bundle can hold a solution per way of failing. Rank processes get them pickled: their
functions live in `problems/`, which every rank can import.
"""

from __future__ import annotations

import dataclasses

from problems.collective import all_gather, all_reduce
from problems.spec import Case, Problem

TINY = (Case("dev-tiny", "float32", {"n": 256}),)


def variant(slug: str) -> Problem:
    return dataclasses.replace(all_reduce.PROBLEM, slug=slug, dev_cases=TINY)


CATALOG: dict[str, Problem] = {
    "all-reduce": all_reduce.PROBLEM,
    "all-gather": dataclasses.replace(
        all_gather.PROBLEM, dev_cases=all_gather.PROBLEM.dev_cases[:1]
    ),
    **{
        slug: variant(slug)
        for slug in (
            "ar-import-error",
            "ar-wrong",
            "ar-raises",
            "ar-all-raise",
            "ar-crashes",
            "ar-hangs",
            "ar-after-failures",
            "ar-absent",
            "ar-imports-a",
            "ar-imports-b",
            "ar-imports-fail",
            "ar-imports-hang",
        )
    },
}

# `_notes.py`: solutions note pids in files, so that the tests can see what ran where.
NOTES = """
import os

def note_pid(tag, pid=None):
    open(os.path.join({pid_dir!r}, f"{{tag}}-{{pid or os.getpid()}}"), "w").close()
"""

ALL_REDUCE = """
import torch.distributed as dist
from _notes import note_pid

def solution(x):
    note_pid(__name__)
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

ALL_REDUCE_PLAIN = """
import torch.distributed as dist

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

ALL_GATHER = """
import torch
import torch.distributed as dist
from _notes import note_pid

def solution(x):
    note_pid(__name__)
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return torch.cat(parts)
"""

IMPORT_ERROR = """
import torch

print("importing on purpose a name that does not exist")
undefined_helper()

def solution(x):
    return x
"""

WRONG = """
import torch.distributed as dist

def solution(x):
    return x * dist.get_world_size()
"""

RAISES = """
import torch.distributed as dist

def solution(x):
    if dist.get_rank() == 1:
        raise ValueError("rank 1 refuses to reduce")
    out = x.clone()
    dist.all_reduce(out)  # the other ranks wait here for rank 1 forever
    return out
"""

ALL_RAISE = """
import torch.distributed as dist

def solution(x):
    raise ValueError(f"rank {dist.get_rank()} refuses too")
"""

CRASHES = """
import os
import signal
import torch.distributed as dist

def solution(x):
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

# Every rank starts a grandchild; rank 0 then never joins the collective.
HANGS = """
import subprocess
import threading
import torch.distributed as dist
from _notes import note_pid

def solution(x):
    note_pid("hang-rank")
    child = subprocess.Popen(["sleep", "600"])
    note_pid("hang-grandchild", child.pid)
    if dist.get_rank() == 0:
        threading.Event().wait()
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

# Notes every import in a file of the folder @NOTES@ stands for (shared with the sandbox:
# the bundle's own folder is read-only there): which process, and what it saw.
RECORDS_IMPORT = """
import json
import os
import torch.distributed as dist

with open(os.path.join("@NOTES@", "imported-" + __name__), "a") as f:
    record = {
        "pid": os.getpid(),
        "ranked": dist.is_initialized(),
        "cache": os.environ.get("PKB_EXTENSION_CACHE"),
        "cwd": os.getcwd(),
    }
    f.write(json.dumps(record) + "\\n")
"""

IMPORTS_AND_REDUCES = RECORDS_IMPORT + ALL_REDUCE_PLAIN

IMPORT_RAISES = (
    RECORDS_IMPORT
    + """
raise RuntimeError("refusing to import")

def solution(x):
    return x
"""
)

IMPORT_HANGS = (
    RECORDS_IMPORT
    + """
import threading

threading.Event().wait()

def solution(x):
    return x
"""
)
