from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from portal.problems import starter
from portal.problems.models import Problem

# The fields copied from the catalog; status and weight belong to the admins.
_MIRRORED = (
    "title",
    "category",
    "description",
    "signature",
    "reference_source",
    "world_sizes",
    "dtypes",
    "public_cases",
    "demo_cases",
    "tolerances",
    "helper_modules",
    "starter_source",
)


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    bumped: list[str] = field(default_factory=list)  # also in `updated`
    retired: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = []
        for name in ("created", "updated", "bumped", "retired"):
            slugs = getattr(self, name)
            if slugs:
                parts.append(f"{name} {len(slugs)}: {', '.join(slugs)}")
        parts.append(f"unchanged {len(self.unchanged)}")
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


def problems_sync(*, catalog: Iterable[Any] | None = None) -> SyncReport:
    """Mirror the problem catalog into the database. Running it twice changes nothing.

    New problems are published; a problem whose code version changed gets its version
    bumped; a problem gone from the catalog is retired (its results stay in the database).
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
                Problem.objects.create(slug=spec.slug, status=Problem.Status.PUBLISHED, **fields)
                report.created.append(spec.slug)
                continue
            changed = [name for name, value in fields.items() if getattr(row, name) != value]
            if not changed:
                report.unchanged.append(spec.slug)
                continue
            if "code_version" in changed:
                row.version += 1
                changed.append("version")
                report.bumped.append(spec.slug)
            for name in _MIRRORED + ("code_version",):
                setattr(row, name, fields[name])
            row.save(update_fields=[*changed, "updated_at"])
            report.updated.append(spec.slug)
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
