"""The open results dataset: one row per attempt of a model or agent entry, and one per
counted result of a people's team, as CSV or Parquet (docs/dataset.md lists the columns).

What it never holds: a team's other submissions (only an entry's samples, which are public
attempts, and the results the boards already show), results on problems that are not
published, any result's message or log (they may echo code), and code at all unless its
problem's solutions are public (Problem.solutions_public_after has passed), the date after
which the site serves the passed bundles of that problem to anyone.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.utils import timezone

from evaluator.face import BundleError, read_bundle, spreadsheet_safe
from portal.entries.models import Entry
from portal.entries.selectors import AttemptRow, entry_attempts, scope_of
from portal.leaderboard.selectors import counted_query, counted_results
from portal.problems.models import Problem
from portal.submissions.models import Submission


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str


COLUMNS = (
    Column("row_kind", pa.string(), '"attempt": one sample of an entry at one problem; '
           '"counted": a people\'s team\'s counted result, as its board ranks it.'),
    Column("entry", pa.string(), "The entry's slug; empty on counted rows."),
    Column("entry_name", pa.string(), "The entry's name, or the team's on counted rows."),
    Column("entry_kind", pa.string(), '"model", "agent", or "people" on counted rows.'),
    Column("team", pa.string(), "The slug of the team that registered the entry or submitted."),
    Column("model_name", pa.string(), "The entry's declared model; empty on counted rows."),
    Column("model_version", pa.string(), "The entry's declared model version."),
    Column("harness", pa.string(), "The agent or harness that drove the model."),
    Column("sampling", pa.string(), "The entry's declared sampling settings."),
    Column("evaluated_on", pa.date32(), "The entry's declared date of evaluation."),
    Column("samples_per_problem", pa.int32(), "n: the samples per problem the entry declared."),
    Column("k", pa.int32(), "The k of the entry's pass@k."),
    Column("sample", pa.int32(), "The sample's number in the entry (1, 2, ...)."),
    Column("attempt", pa.int32(), "The entry's attempt number at this problem, 1..n."),
    Column("submission_id", pa.int64(), "The submission that judged it (the newest of the "
           "counted code on counted rows)."),
    Column("problem", pa.string(), "The problem's slug."),
    Column("category", pa.string(), "The problem's category."),
    Column("weight", pa.float64(), "The problem's weight on the boards."),
    Column("problem_version", pa.int32(), "The problem version it was judged against."),
    Column("problem_version_current", pa.int32(), "The problem's version now; a row judged "
           "against an older one is stale and not counted."),
    Column("outcome", pa.string(), "passed, wrong_answer, runtime_error, timeout, "
           "compile_error, not_run; flagged (a pass a check casts doubt on), disqualified, "
           "no_result (judged without a result for it); not judged: pending, failed (the "
           "host failed, not the sample), cancelled, stale."),
    Column("judged", pa.bool_(), "Counts in its problem's n for pass@k."),
    Column("passed", pa.bool_(), "Counts as correct (c of pass@k): passed, unflagged."),
    Column("fast_1", pa.bool_(), "Passed with the speedup's interval wholly above 1."),
    Column("speedup", pa.float64(), "Reference time over candidate time: the median of the "
           "paired rounds' ratios, the median over judged runs where re-run."),
    Column(
        "speedup_low",
        pa.float64(),
        "The speedup's interval (nominal 99% on GPU hosts, the pairs' range on CPU hosts), "
        "lower end.",
    ),
    Column(
        "speedup_high",
        pa.float64(),
        "The speedup's interval (nominal 99% on GPU hosts, the pairs' range on CPU hosts), "
        "upper end.",
    ),
    Column("roofline", pa.float64(), "Mean over cases of the links' floor over the time "
           "(1.0 is the link limit); empty on hosts without a measured bandwidth (CPU)."),
    Column("time_us", pa.float64(), "Median per-call time summed over cases, microseconds."),
    Column("ref_time_us", pa.float64(), "The reference's, timed beside it, microseconds."),
    Column("run_count", pa.int32(), "Judged runs the numbers are the medians of."),
    Column("flags", pa.string(), "Why a pass is not trusted, ';'-separated."),
    Column("hardware_profile", pa.string(), "The hardware profile that judged it."),
    Column("evaluator_version", pa.string(), "The evaluator's version, as its host reported it."),
    Column("torch", pa.string(), "PyTorch's version on the host."),
    Column("cuda", pa.string(), "CUDA's version on the host (GPU hosts)."),
    Column("nccl", pa.string(), "NCCL's version on the host (GPU hosts)."),
    Column("driver", pa.string(), "The GPU driver's version (GPU hosts)."),
    Column("python", pa.string(), "Python's version on the host."),
    Column("gpu", pa.string(), "The GPU model (GPU hosts)."),
    Column("world_size", pa.int32(), "Ranks the problem ran on."),
    Column("environment", pa.string(), "The host's whole environment fingerprint, as JSON."),
    Column("submitted_at", pa.timestamp("s", tz="UTC"), "When the sample was sent."),
    Column("finished_at", pa.timestamp("s", tz="UTC"), "When its evaluation finished."),
    Column("code", pa.string(), "The sample's source for this problem, only once the "
           "problem's solutions are public; empty before."),
)  # fmt: skip
NAMES = tuple(c.name for c in COLUMNS)
SCHEMA = pa.schema(
    [pa.field(c.name, c.type, metadata={"doc": c.doc}) for c in COLUMNS],
    metadata={"source": "pkb results dataset", "columns": "docs/dataset.md"},
)
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
_ENV_KEYS = ("torch", "cuda", "nccl", "driver", "python", "gpu")


# Names of the site's own machines and accounts: not the public's to read.
PRIVATE_ENV_KEYS = ("hostname", "candidate_user")


def public_environment(env: Any) -> dict[str, Any]:
    """The host's environment fingerprint without the names of the site's machines."""
    env = env if isinstance(env, dict) else {}
    return {k: v for k, v in env.items() if k not in PRIVATE_ENV_KEYS}


def _environment(env: dict[str, Any]) -> dict[str, Any]:
    env = public_environment(env)
    found = {key: str(env[key]) if env.get(key) is not None else None for key in _ENV_KEYS}
    world_size = env.get("world_size")
    return {
        **found,
        "evaluator_version": str(env["evaluator"]) if env.get("evaluator") else None,
        "world_size": world_size if isinstance(world_size, int) else None,
        "environment": json.dumps(env, sort_keys=True, default=str),
    }


class _Code:
    """The sources of public problems' solutions, one bundle read per submission."""

    def __init__(self) -> None:
        now = timezone.now()
        self.public = set(
            Problem.objects.published()
            .filter(solutions_public_after__lte=now)
            .values_list("slug", flat=True)
        )
        self._bundles: dict[int, dict[str, str]] = {}

    def of(self, submission_id: int, slug: str) -> str | None:
        if slug not in self.public:
            return None
        if submission_id not in self._bundles:
            self._bundles[submission_id] = self._read(submission_id)
        return self._bundles[submission_id].get(slug)

    def _read(self, submission_id: int) -> dict[str, str]:
        submission = Submission.objects.only("bundle", "bundle_name", "problems").get(
            pk=submission_id
        )
        try:
            with submission.bundle.open("rb") as fh:
                bundle = read_bundle(
                    submission.bundle_name, fh.read(), known_slugs=submission.problems
                )
        except (BundleError, OSError):
            return {}
        return {
            slug: bundle.files[path].decode("utf-8", "replace")
            for slug, path in bundle.solutions.items()
            if slug in self.public
        }


def _attempt_row(entry: Entry, a: AttemptRow, code: _Code) -> dict[str, Any]:
    return {
        "row_kind": "attempt",
        "entry": entry.slug,
        "entry_name": entry.name,
        "entry_kind": entry.kind,
        "team": entry.team.slug,
        "model_name": entry.model_name,
        "model_version": entry.model_version,
        "harness": entry.harness,
        "sampling": entry.sampling,
        "evaluated_on": entry.evaluated_on,
        "samples_per_problem": entry.n,
        "k": entry.k,
        "sample": a.sample_number,
        "attempt": a.attempt,
        "submission_id": a.submission_id,
        "problem": a.slug,
        "category": a.category,
        "weight": a.weight,
        "problem_version": a.problem_version,
        "problem_version_current": a.current_version,
        "outcome": a.outcome,
        "judged": a.judged,
        "passed": a.passed,
        "fast_1": a.faster_than(1.0),
        "speedup": a.speedup,
        "speedup_low": a.speedup_low,
        "speedup_high": a.speedup_high,
        "roofline": a.roofline,
        "time_us": a.time_us,
        "ref_time_us": a.ref_time_us,
        "run_count": a.run_count or None,
        "flags": ";".join(str(f) for f in a.flags),
        "hardware_profile": a.profile,
        **_environment(a.environment),
        "submitted_at": a.submitted_at,
        "finished_at": a.finished_at,
        "code": code.of(a.submission_id, a.slug),
    }


def entry_rows(entries: Iterable[Entry], *, profile: str | None = None, problem_ids=None):
    """Attempt rows of the entries on published problems (of `problem_ids` when given)."""
    by_id = {e.pk: e for e in entries}
    code = _Code()
    for a in entry_attempts(list(by_id), profile=profile):
        if not a.published or (problem_ids is not None and a.problem_id not in problem_ids):
            continue
        yield _attempt_row(by_id[a.entry_id], a, code)


def counted_rows(*, profile: str, problem_ids: set[int]) -> Iterator[dict[str, Any]]:
    """The people's teams' counted results, as the board ranks them (examples left out)."""
    counted = [
        c
        for c in counted_results(counted_query(profile=profile, problem_ids=list(problem_ids)))
        if c.team_id is not None
    ]
    problems = Problem.objects.in_bulk({c.problem_id for c in counted})
    submissions = {
        pk: (environment, created)
        for pk, environment, created in Submission.objects.filter(
            pk__in={c.submission_id for c in counted}
        ).values_list("pk", "environment", "created_at")
    }
    code = _Code()
    for c in sorted(counted, key=lambda c: (c.team_slug, problems[c.problem_id].slug)):
        problem = problems[c.problem_id]
        solved = c.solved
        yield {
            "row_kind": "counted",
            "entry_name": c.team_name,
            "entry_kind": "people",
            "team": c.team_slug,
            "submission_id": c.submission_id,
            "problem": problem.slug,
            "category": problem.category,
            "weight": problem.weight,
            "problem_version": problem.version,
            "problem_version_current": problem.version,
            "outcome": "passed",
            "judged": True,
            "passed": True,
            "fast_1": solved.lower is not None and solved.lower > 1.0,
            "speedup": c.speedup,
            "speedup_low": c.speedup_low,
            "speedup_high": c.speedup_high,
            "roofline": c.roofline,
            "time_us": c.time_us,
            "ref_time_us": c.ref_time_us,
            "run_count": c.run_count,
            "flags": "",
            "hardware_profile": profile,
            **_environment(submissions[c.submission_id][0] or {}),
            "submitted_at": submissions[c.submission_id][1],
            "finished_at": c.reached_at,
            "code": code.of(c.submission_id, problem.slug),
        }


def board_rows(*, profile: str, category: str | None, who: str) -> list[dict[str, Any]]:
    """The dataset of a board: its entries' attempts and its teams' counted results."""
    scope = {pid for pid, _, _ in scope_of(profile, category)}
    rows: list[dict[str, Any]] = []
    if who != "people":
        entries = Entry.objects.in_good_standing().select_related("team").order_by("slug")
        rows += entry_rows(entries, profile=profile, problem_ids=scope)
    if who != "models" and scope:
        rows += counted_rows(profile=profile, problem_ids=scope)
    return rows


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):  # names and notes are the teams' own text
        return spreadsheet_safe(value)
    return value


def to_csv(rows: Iterable[dict[str, Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(NAMES)
    for row in rows:
        writer.writerow([_csv_value(row.get(name)) for name in NAMES])
    return buffer.getvalue().encode("utf-8")


def to_parquet(rows: list[dict[str, Any]]) -> bytes:
    table = pa.Table.from_pylist([{n: row.get(n) for n in NAMES} for row in rows], schema=SCHEMA)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def encode(rows: list[dict[str, Any]], fmt: str) -> bytes:
    return to_parquet(rows) if fmt == "parquet" else to_csv(rows)
