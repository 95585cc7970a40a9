"""Suite-wide setup. App-level fixtures live in each folder's conftest.py."""

from __future__ import annotations

import os

import pytest

# Every process this suite starts, rank processes included, inherits these: multicast
# must never be enabled on the shared GPU hosts where the GPU-marked tests run.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
# Workers the suite starts take work at once: a canary at start would delay each by a
# CPU reading, and one out of bounds on a loaded machine would hold its queue for minutes.
# The canary's own tests turn it on (tests/evaluator/test_canary.py,
# tests/integration/test_canary_worker.py).
os.environ.setdefault("PKB_CANARY_INTERVAL_S", "0")
# The suite's CPU workers are development hosts (a sandbox may start without root or a
# freezer), and most tests report results without an environment: on the CPU profile they
# rank, as in `make run`: for the portal processes the suite starts (the environment) and
# for this one, whose settings pytest-django loaded before this file (the fixture). The
# rule itself runs with the setting cleared (tests/portal/submissions/test_confinement.py).
os.environ.setdefault("PKB_RANK_WEAKER_SANDBOX", "cpu")


@pytest.fixture(autouse=True)
def _development_hosts_rank(request):
    # Without pytest-django (a GPU host's image runs the evaluator's tests with
    # `-p no:django`, and has no Django) there are no settings to set.
    if request.config.pluginmanager.has_plugin("django"):
        request.getfixturevalue("settings").PKB_RANK_WEAKER_SANDBOX = ("cpu",)
