"""`pkb-worker` whose canary judges the source in the file named by its one argument
against the reference, instead of the reference itself: the test rewrites that file to
make the host's readings go out of bounds and back (test_canary_worker.py)."""

from __future__ import annotations

import sys

from evaluator.host import canary
from evaluator.host.tasks import main

if __name__ == "__main__":
    canary.JUDGE.extend(["--candidate", sys.argv[1]])
    main([])
