"""The versioned JSON contract between the portal and evaluator hosts.

Portal -> host: `EvaluationRequest`, as the only argument of the task `evaluator.evaluate`
on the queue of a hardware profile.
Host -> portal: small messages as the only argument of tasks on the `portal` queue:
`portal.evaluation_started`, `portal.evaluation_progress` (with, optionally, the phase and
the result of the problem just judged), `portal.evaluation_finished`.

Every message is a JSON object with "version"; a reader rejects versions it does not know
instead of guessing. `evaluation_id` names one attempt: a re-queued submission gets a new
one, so messages of an abandoned attempt are recognised and dropped.

The results a host reports (`ProblemResult` and `CaseResult`, their statuses and flags, the
rules for text from bundle code, `ContractError`) are defined in evaluator/results.py and
re-exported here under their own names: both sides import the whole contract from this
module.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Any

from evaluator.results import LOG_CAP_BYTES as LOG_CAP_BYTES
from evaluator.results import CaseResult as CaseResult
from evaluator.results import ContractError as ContractError
from evaluator.results import ProblemResult as ProblemResult
from evaluator.results import ProblemStatus as ProblemStatus
from evaluator.results import ResultFlag as ResultFlag
from evaluator.results import cap_log as cap_log
from evaluator.results import known_fields
from evaluator.results import printable as printable
from evaluator.results import spreadsheet_safe as spreadsheet_safe

CONTRACT_VERSION = 1

EVALUATE_TASK = "evaluator.evaluate"
STARTED_TASK = "portal.evaluation_started"
PROGRESS_TASK = "portal.evaluation_progress"
FINISHED_TASK = "portal.evaluation_finished"
PORTAL_QUEUE = "portal"


class Mode(enum.StrEnum):
    """What a submission asks of the host; only RANKED results count on any board."""

    TEST = "test"  # dev cases, correctness only, no timing rounds
    BENCHMARK = "benchmark"  # the full judging, shown to the team only
    RANKED = "ranked"  # the full judging, ranked (the default; all a host knew before)
    PROFILE = "profile"  # the judging of one case, with per-rank profiles as artifacts


# A host's artifacts (profile traces and tables) travel in the finished message: each is
# cut to ARTIFACT_CAP_BYTES by its maker (saying so in `truncated`), and a message whose
# artifacts together exceed ARTIFACTS_CAP_BYTES is refused whole.
ARTIFACT_CAP_BYTES = 8 * 1024 * 1024
ARTIFACTS_CAP_BYTES = 24 * 1024 * 1024
ARTIFACT_MEDIA_TYPES = ("application/json", "text/csv", "text/plain", "text/markdown")
_ARTIFACT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def is_artifact_name(name: str) -> bool:
    """A plain file name, as every artifact a host sends must have (the site looks up no
    other: a NUL byte in one reached PostgreSQL, which refuses it with an error)."""
    return bool(_ARTIFACT_NAME.fullmatch(name)) and ".." not in name


class EvaluationOutcome(enum.StrEnum):
    DONE = "done"  # every problem has a result, whatever it is
    FAILED = "failed"  # the bundle could not be evaluated at all (reason says why)


# How the host says it could not confine bundle code as its settings require
# (evaluator/judge/confinement.py): in a FAILED outcome's reason and in the canary's
# reading, for people; for programs, the finished message's "fault" (FAULT_SANDBOX), which
# only that path sets, so no text of a bundle's can ask for it. A fault of that host
# alone: the portal queues the bundle again for another worker, and the canary holds the
# host's work.
SANDBOX_FAULT = "this host's sandbox cannot start"
FAULT_SANDBOX = "sandbox"


def _check_version(data: Any, kind: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ContractError(f"{kind}: expected a JSON object, got {type(data).__name__}")
    if data.get("version") != CONTRACT_VERSION:
        raise ContractError(
            f"{kind}: contract version {data.get('version')!r} is not {CONTRACT_VERSION}"
        )
    return data


@dataclass(frozen=True)
class EvaluationRequest:
    evaluation_id: str
    submission_id: int
    profile: str
    bundle_name: str
    bundle_b64: str
    bundle_sha256: str
    problems: list[str]
    version: int = CONTRACT_VERSION
    # Optional fields of version 1: a request without them is a ranked run.
    mode: str = Mode.RANKED.value
    profile_case: str = ""  # PROFILE: the case to profile ("" = the host picks)

    @classmethod
    def build(
        cls,
        *,
        evaluation_id: str,
        submission_id: int,
        profile: str,
        bundle_name: str,
        bundle: bytes,
        problems: list[str],
        mode: Mode = Mode.RANKED,
        profile_case: str = "",
    ) -> EvaluationRequest:
        return cls(
            evaluation_id=evaluation_id,
            submission_id=submission_id,
            profile=profile,
            bundle_name=bundle_name,
            bundle_b64=base64.b64encode(bundle).decode("ascii"),
            bundle_sha256=hashlib.sha256(bundle).hexdigest(),
            problems=list(problems),
            mode=Mode(mode).value,
            profile_case=profile_case,
        )

    def bundle(self) -> bytes:
        data = base64.b64decode(self.bundle_b64)
        if hashlib.sha256(data).hexdigest() != self.bundle_sha256:
            raise ContractError("bundle bytes do not match their sha256")
        return data

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> EvaluationRequest:
        data = _check_version(data, "evaluation request")
        try:
            return cls(
                evaluation_id=str(data["evaluation_id"]),
                submission_id=int(data["submission_id"]),
                profile=str(data["profile"]),
                bundle_name=str(data["bundle_name"]),
                bundle_b64=str(data["bundle_b64"]),
                bundle_sha256=str(data["bundle_sha256"]),
                problems=[str(s) for s in data["problems"]],
                mode=Mode(str(data.get("mode", Mode.RANKED.value))).value,
                profile_case=str(data.get("profile_case", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ContractError(f"evaluation request: bad field: {exc}") from exc


@dataclass(frozen=True)
class Artifact:
    """A file a host made for the team (a profile's trace or table), not a score.

    Its bytes come from code that ran beside bundle code (a profiler in the candidate's
    runner), so the portal stores them as opaque downloads for the team alone and trusts
    nothing in them: name, media type and size are checked here before anything is kept."""

    name: str  # a plain file name: letters, digits, '.', '_', '-'
    media_type: str  # one of ARTIFACT_MEDIA_TYPES
    data_b64: str
    truncated: bool = False  # cut to ARTIFACT_CAP_BYTES by its maker
    note: str = ""  # one line for the page ("rank 0, case n=65536, 10 calls")

    @classmethod
    def build(
        cls, *, name: str, media_type: str, data: bytes, truncated: bool = False, note: str = ""
    ) -> Artifact:
        if len(data) > ARTIFACT_CAP_BYTES:
            data, truncated = data[:ARTIFACT_CAP_BYTES], True
        artifact = cls(
            name=name,
            media_type=media_type,
            data_b64=base64.b64encode(data).decode("ascii"),
            truncated=truncated,
            note=printable(note)[:300],
        )
        artifact.check()
        return artifact

    def data(self) -> bytes:
        try:
            return base64.b64decode(self.data_b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ContractError(f"artifact {self.name!r}: bad base64") from exc

    def check(self) -> None:
        if not is_artifact_name(self.name):
            raise ContractError(f"artifact name {self.name[:120]!r} is not a plain file name")
        if self.media_type not in ARTIFACT_MEDIA_TYPES:
            raise ContractError(f"artifact {self.name!r}: media type {self.media_type!r}")
        if len(self.data_b64) > (ARTIFACT_CAP_BYTES + 2) // 3 * 4:
            raise ContractError(f"artifact {self.name!r} is over {ARTIFACT_CAP_BYTES} bytes")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Artifact:
        try:
            values = known_fields(cls, data)
            artifact = cls(
                name=str(values["name"]),
                media_type=str(values["media_type"]),
                data_b64=str(values["data_b64"]),
                truncated=bool(values.get("truncated", False)),
                note=printable(str(values.get("note", "")))[:300],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ContractError(f"artifact: bad field: {exc}") from exc
        artifact.check()
        return artifact


def read_artifacts(data: Any) -> list[Artifact]:
    """A finished message's "artifacts" (absent: none), checked, or ContractError."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise ContractError("artifacts: expected a list")
    artifacts = [Artifact.from_json(item) for item in data]
    names = [a.name for a in artifacts]
    if len(set(names)) != len(names):
        raise ContractError("artifacts: two with one name")
    if sum(len(a.data_b64) * 3 // 4 for a in artifacts) > ARTIFACTS_CAP_BYTES:
        raise ContractError(f"artifacts: over {ARTIFACTS_CAP_BYTES} bytes together")
    return artifacts


def started_message(*, evaluation_id: str, host: str) -> dict[str, Any]:
    return {"version": CONTRACT_VERSION, "evaluation_id": evaluation_id, "host": host}


class Phase(enum.StrEnum):
    """What a running evaluation is doing, in a progress message's optional "phase"."""

    COMPILING = "compiling"  # every solution imported once, before anything is timed
    JUDGING = "judging"  # problem by problem; "current" names the one being judged


def progress_message(
    *,
    evaluation_id: str,
    done: int,
    total: int,
    current: str,
    phase: Phase | None = None,
    result: ProblemResult | None = None,
) -> dict[str, Any]:
    """`phase` and `result` (the problem just judged, as the finished message will carry
    it) are optional fields of version 1: a portal that does not know them ignores them,
    and one that does reads a message without them as before. A result here is shown while
    the evaluation runs; the finished message's results are the ones recorded."""
    message: dict[str, Any] = {
        "version": CONTRACT_VERSION,
        "evaluation_id": evaluation_id,
        "done": done,
        "total": total,
        "current": current,
    }
    if phase is not None:
        message["phase"] = str(phase)
    if result is not None:
        message["result"] = result.to_json()
    return message


def finished_message(
    *,
    evaluation_id: str,
    outcome: EvaluationOutcome,
    reason: str = "",
    results: list[ProblemResult] | None = None,
    environment: dict[str, Any] | None = None,
    artifacts: list[Artifact] | None = None,
    fault: str = "",
) -> dict[str, Any]:
    """ "artifacts" and "fault" (a FAILED outcome's cause the portal acts on:
    FAULT_SANDBOX) are optional fields of version 1 (read with `read_artifacts`)."""
    message: dict[str, Any] = {
        "version": CONTRACT_VERSION,
        "evaluation_id": evaluation_id,
        "outcome": str(outcome),
        "reason": reason,
        "results": [r.to_json() for r in results or []],
        "environment": environment or {},
    }
    if artifacts:
        message["artifacts"] = [a.to_json() for a in artifacts]
    if fault:
        message["fault"] = fault
    return message


def read_message(data: Any, kind: str, required: tuple[str, ...]) -> dict[str, Any]:
    """Check a host -> portal message's version and fields, or raise ContractError."""
    data = _check_version(data, kind)
    missing = [name for name in ("evaluation_id", *required) if name not in data]
    if missing:
        raise ContractError(f"{kind}: missing fields {', '.join(missing)}")
    return data
