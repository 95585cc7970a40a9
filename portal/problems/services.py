from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from portal.problems import starter
from portal.problems.models import Problem

# The mirrored fields the admin form edits too (the others are read-only there). An admin's
# edit stands until the catalog changes that field; the report names each one either way.
_ADMIN_EDITABLE = ("title", "category", "description")


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    bumped: list[str] = field(default_factory=list)  # also in `updated`
    retired: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # Per updated slug, the mirrored fields written (never status, weight, hardware or
    # publication date: those are the admins' and sync leaves them alone).
    changes: dict[str, list[str]] = field(default_factory=dict)
    # "slug: field" of admin edits kept (the catalog left the field alone) and of those
    # replaced because the catalog changed the field since.
    kept: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = []
        for name in ("created", "updated", "bumped", "retired"):
            slugs = getattr(self, name)
            if name == "updated":
                slugs = [f"{slug} ({', '.join(self.changes[slug])})" for slug in slugs]
            if slugs:
                parts.append(f"{name} {len(slugs)}: {', '.join(slugs)}")
        parts.append(f"unchanged {len(self.unchanged)}")
        if self.kept:
            parts.append(f"admin edits kept {len(self.kept)}: {', '.join(self.kept)}")
        if self.replaced:
            parts.append(
                f"ADMIN EDITS REPLACED by the catalog's new text {len(self.replaced)}: "
                + ", ".join(self.replaced)
            )
        return "; ".join(parts)


def _bytes_by_world_size(problem: Any, case: Any) -> dict[str, int]:
    # JSON keys are strings; a world size the byte model cannot size is left out.
    sizes = {}
    for world_size in problem.world_sizes:
        try:
            sizes[str(world_size)] = int(problem.bytes_moved(case, world_size))
        except (ArithmeticError, ValueError, KeyError):
            continue
    return sizes


def _tolerances(problem: Any) -> dict[str, dict[str, float]]:
    return {
        dtype: {"atol": problem.tolerance(dtype).atol, "rtol": problem.tolerance(dtype).rtol}
        for dtype in problem.dtypes
    }


def _reference_module(problem: Any) -> str:
    return str(inspect.getmodule(problem.reference).__name__)  # type: ignore[union-attr]


def _helper_modules(problem: Any) -> list[dict[str, str]]:
    return [
        {"path": starter.module_path(name), "source": starter.module_source(name)}
        for name in starter.helper_modules(_reference_module(problem))
    ]


def _catalog_fields(problem: Any) -> dict[str, Any]:
    return {
        "title": problem.title,
        "category": str(problem.category),
        "description": problem.description,
        "signature": problem.signature,
        "reference_source": problem.reference_source,
        "world_sizes": list(problem.world_sizes),
        "dtypes": list(problem.dtypes),
        "public_cases": [case.to_json() for case in problem.dev_cases],
        "demo_cases": [
            {**case.to_json(), "bytes_moved": _bytes_by_world_size(problem, case)}
            for case in problem.eval_cases
        ],
        "tolerances": _tolerances(problem),
        "helper_modules": _helper_modules(problem),
        "starter_source": starter.starter_source(
            root=_reference_module(problem),
            slug=problem.slug,
            title=problem.title,
            signature=problem.signature,
        ),
        "code_version": problem.version,
    }


def _catalog_text(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: fields[name] for name in _ADMIN_EDITABLE}


def normalise_newlines(text: str) -> str:
    """A text's line breaks as the catalog writes them: LF, never CRLF or CR."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _same_text(value: Any, synced: Any) -> bool:
    if isinstance(value, str) and isinstance(synced, str):
        return normalise_newlines(value) == normalise_newlines(synced)
    return value == synced


def _with_admin_edits(row: Problem, fields: dict[str, Any], report: SyncReport) -> dict[str, Any]:
    """The values to write: the catalog's, except where an admin edited a field that the
    catalog has not changed since the last sync."""
    wanted = dict(fields)
    synced = row.catalog_text or {}
    for name in _ADMIN_EDITABLE:
        if name not in synced or _same_text(getattr(row, name), synced[name]):
            continue  # not edited since the last sync (line endings aside: issue 40)
        if fields[name] == synced[name]:
            wanted[name] = getattr(row, name)
            report.kept.append(f"{row.slug}: {name}")
        elif fields[name] != getattr(row, name):
            report.replaced.append(f"{row.slug}: {name}")
    return wanted


def _sync_row(row: Problem, fields: dict[str, Any], report: SyncReport) -> None:
    wanted = _with_admin_edits(row, fields, report)
    changed = [name for name, value in wanted.items() if getattr(row, name) != value]
    text = _catalog_text(fields)
    if not changed:
        if row.catalog_text != text:  # the catalog now says what an admin had written
            row.catalog_text = text
            row.save(update_fields=["catalog_text"])
        report.unchanged.append(row.slug)
        return
    if "code_version" in changed:
        row.version += 1
        changed.append("version")
        report.bumped.append(row.slug)
    for name, value in wanted.items():
        setattr(row, name, value)
    row.catalog_text = text
    row.save(update_fields=[*changed, "catalog_text", "updated_at"])
    report.updated.append(row.slug)
    report.changes[row.slug] = [name for name in changed if name != "code_version"]


def problems_sync(*, catalog: Iterable[Any] | None = None) -> SyncReport:
    """Mirror the problem catalog into the database. Running it twice changes nothing.

    New problems are published; a problem whose code version changed gets its version
    bumped; a problem gone from the catalog is retired (its results stay in the database).
    Status, weight, hardware and publication date are the admins' and never touched; an
    admin's edit of a title, category or description is kept until the catalog changes
    that field, and the report names each edit kept or replaced.
    """
    if catalog is None:
        import problems  # imports torch: only here, not in every web process

        catalog = problems.all_problems()
    report = SyncReport()
    with transaction.atomic():
        existing = {p.slug: p for p in Problem.objects.select_for_update()}
        seen = set()
        for spec in catalog:
            seen.add(spec.slug)
            fields = _catalog_fields(spec)
            row = existing.get(spec.slug)
            if row is None:
                Problem.objects.create(
                    slug=spec.slug,
                    status=Problem.Status.PUBLISHED,
                    catalog_text=_catalog_text(fields),
                    **fields,
                )
                report.created.append(spec.slug)
                continue
            _sync_row(row, fields, report)
        gone = [
            slug
            for slug, row in existing.items()
            if slug not in seen and row.status != Problem.Status.RETIRED
        ]
        Problem.objects.filter(slug__in=gone).update(status=Problem.Status.RETIRED)
        report.retired.extend(sorted(gone))
    return report


def problems_set_status(*, problems: Iterable[Problem], status: Problem.Status) -> int:
    """Publish, hide or retire problems (an admin's curation); returns how many changed."""
    ids = [p.pk for p in problems]
    return Problem.objects.filter(pk__in=ids).exclude(status=status).update(status=status)
