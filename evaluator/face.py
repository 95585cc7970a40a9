"""The evaluator's one face to the portal (the site, its API and the `pkb` CLI).

The portal imports the evaluator through this module alone (tests/test_layers.py holds it
to that), so the judge's, the host's and the intake's files can move without touching the
portal. What is here, and why the portal needs it:

- the contract: the messages both sides exchange, the results a host reports, their
  statuses and flags, and the rules for text from bundle code (evaluator/contract.py);
- hardware profiles: what a submission may ask for, and each profile's queue;
- the bundle's rules, so an upload is refused at once for what a host would refuse;
- the precheck, so a team sees at upload what a host will report under review;
- the broker's keys both sides read and write: liveness, sent markers, stop signals;
- the speedup statistics the portal re-scores stored runs with, and the spread a
  profile's runs add by default.
"""

from __future__ import annotations

import importlib
from typing import Any

# Where each name lives. Imported on first use (PEP 562), so a client that needs the
# contract alone (the `pkb` CLI) loads neither torch nor the judge.
_HOMES = {
    "evaluator.contract": (
        "ARTIFACT_CAP_BYTES",
        "ARTIFACT_MEDIA_TYPES",
        "EVALUATE_TASK",
        "FAULT_SANDBOX",
        "FINISHED_TASK",
        "PORTAL_QUEUE",
        "PROGRESS_TASK",
        "SANDBOX_FAULT",
        "STARTED_TASK",
        "Artifact",
        "ContractError",
        "EvaluationOutcome",
        "EvaluationRequest",
        "Mode",
        "Phase",
        "ProblemResult",
        "ProblemStatus",
        "ResultFlag",
        "cap_log",
        "is_artifact_name",
        "printable",
        "read_artifacts",
        "read_message",
        "spreadsheet_safe",
    ),
    "evaluator.host": ("liveness",),
    "evaluator.host.profiles": (
        "DEFAULT_PROFILE",
        "PROFILES",
        "HardwareProfile",
        "get_profile",
    ),
    "evaluator.host.settings": ("default_run_spread",),
    "evaluator.intake.bundle": (
        "Bundle",
        "BundleError",
        "did_you_mean",
        "read_bundle",
    ),
    "evaluator.intake.precheck": (
        "Finding",
        "precheck_files",
    ),
    "evaluator.judge.stats": (
        "geomean",
        "speedup_interval",
    ),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = importlib.import_module(module)
    # A submodule (liveness) is an attribute of its package only once imported.
    value = (
        getattr(home, name) if hasattr(home, name) else importlib.import_module(f"{module}.{name}")
    )
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
