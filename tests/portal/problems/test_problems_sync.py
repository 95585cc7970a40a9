from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from django.core.management import call_command

from portal.problems.models import Category, Problem
from portal.problems.services import problems_set_status, problems_sync
from problems.collective.all_reduce import solution as all_reduce_reference
from problems.spec import Case, Tolerance

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class FakeSpec:
    """What problems_sync reads of a catalog Problem."""

    slug: str
    title: str = "All-reduce"
    category: str = "collective"
    description: str = "Sum over ranks."
    signature: str = "solution(x: torch.Tensor) -> torch.Tensor"
    reference_source: str = "def solution(x): ..."
    world_sizes: tuple[int, ...] = (2, 4, 8)
    dtypes: tuple[str, ...] = ("float32",)
    version: str = "v1"
    dev_cases: tuple[Case, ...] = (Case("dev-fp32", "float32", {"n": 500}),)
    eval_cases: tuple[Case, ...] = (Case("demo-1m", "float32", {"n": 1 << 20}),)
    reference: Callable = all_reduce_reference

    def tolerance(self, dtype: str) -> Tolerance:
        return Tolerance(atol=1e-5, rtol=1e-5)

    def bytes_moved(self, case: Case, world_size: int) -> int:
        return 2 * case.params["n"] * 4 * (world_size - 1) // world_size


def test_it_creates_new_problems_published():
    report = problems_sync(catalog=[FakeSpec("all-reduce"), FakeSpec("all-gather")])
    assert report.created == ["all-reduce", "all-gather"]
    problem = Problem.objects.get(slug="all-reduce")
    assert problem.status == Problem.Status.PUBLISHED
    assert problem.version == 1
    assert problem.world_sizes == [2, 4, 8]
    assert problem.dtypes == ["float32"]


def test_it_is_idempotent():
    catalog = [FakeSpec("all-reduce"), FakeSpec("all-gather")]
    problems_sync(catalog=catalog)
    before = list(Problem.objects.values())
    report = problems_sync(catalog=catalog)
    assert report.created == report.updated == report.retired == []
    assert report.unchanged == ["all-reduce", "all-gather"]
    assert list(Problem.objects.values()) == before


def test_it_bumps_the_version_when_the_code_changes():
    spec = FakeSpec("all-reduce")
    problems_sync(catalog=[spec])
    report = problems_sync(catalog=[replace(spec, version="v2", title="All-reduce (sum)")])
    assert report.bumped == ["all-reduce"]
    problem = Problem.objects.get(slug="all-reduce")
    assert (problem.version, problem.code_version, problem.title) == (2, "v2", "All-reduce (sum)")


def test_metadata_changes_do_not_bump_the_version():
    spec = FakeSpec("all-reduce")
    problems_sync(catalog=[spec])
    report = problems_sync(catalog=[replace(spec, description="Clearer words.")])
    assert report.updated == ["all-reduce"] and report.bumped == []
    assert Problem.objects.get(slug="all-reduce").version == 1


def test_it_keeps_what_admins_curate():
    problems_sync(catalog=[FakeSpec("all-reduce")])
    Problem.objects.filter(slug="all-reduce").update(status=Problem.Status.HIDDEN, weight=2.0)
    problems_sync(catalog=[FakeSpec("all-reduce", version="v2")])
    problem = Problem.objects.get(slug="all-reduce")
    assert (problem.status, problem.weight) == (Problem.Status.HIDDEN, 2.0)


def test_it_retires_problems_gone_from_the_catalog():
    problems_sync(catalog=[FakeSpec("all-reduce"), FakeSpec("gone")])
    report = problems_sync(catalog=[FakeSpec("all-reduce")])
    assert report.retired == ["gone"]
    assert Problem.objects.get(slug="gone").status == Problem.Status.RETIRED
    assert problems_sync(catalog=[FakeSpec("all-reduce")]).retired == []


def test_the_command_mirrors_the_real_catalog(capsys):
    import problems as catalog

    call_command("sync_problems")
    slugs = {p.slug for p in catalog.all_problems()}
    assert set(Problem.objects.values_list("slug", flat=True)) == slugs
    assert "created" in capsys.readouterr().out
    reference = Problem.objects.get(slug="all-reduce")
    assert "def solution" in reference.reference_source
    assert reference.signature.startswith("solution(")


def test_the_category_choices_mirror_the_catalog():
    from problems.spec import Category as SpecCategory

    assert [(c.value, c.label) for c in SpecCategory] == Category.choices


def test_admins_set_the_status_through_the_service(problems):
    changed = problems_set_status(
        problems=Problem.objects.filter(slug__in=["all-reduce", "secret-op"]),
        status=Problem.Status.HIDDEN,
    )
    assert changed == 1  # secret-op was hidden already
    assert Problem.objects.get(slug="all-reduce").status == Problem.Status.HIDDEN


def test_a_tolerance_change_bumps_the_version_of_a_real_problem():
    """The catalog's version hash covers tolerances, not only the code."""
    import problems as catalog
    from problems.spec import Tolerance

    spec = next(p for p in catalog.all_problems() if p.tolerances)
    dtype, tolerance = next(iter(spec.tolerances.items()))
    looser = replace(
        spec,
        tolerances={
            **spec.tolerances,
            dtype: Tolerance(atol=tolerance.atol * 2, rtol=tolerance.rtol),
        },
    )
    assert looser.version != spec.version
    problems_sync(catalog=[spec])
    assert problems_sync(catalog=[spec]).bumped == []  # idempotent on the real thing
    report = problems_sync(catalog=[looser])
    assert report.bumped == [spec.slug]
    assert Problem.objects.get(slug=spec.slug).version == 2


def test_a_sync_keeps_hardware_and_public_solutions_set_by_admins():
    problems_sync(catalog=[FakeSpec("all-reduce")])
    Problem.objects.filter(slug="all-reduce").update(profiles=["h200x4"])
    problems_sync(catalog=[FakeSpec("all-reduce", version="v2")])
    assert Problem.objects.get(slug="all-reduce").profiles == ["h200x4"]


def test_it_mirrors_the_public_cases_without_bumping_the_version():
    spec = FakeSpec("all-reduce")
    problems_sync(catalog=[spec])
    row = Problem.objects.get(slug="all-reduce")
    assert row.public_cases == [{"name": "dev-fp32", "dtype": "float32", "params": {"n": 500}}]
    bigger = (Case("dev-fp32", "float32", {"n": 500}), Case("dev-ragged", "float32", {"n": 0}))
    report = problems_sync(catalog=[replace(spec, dev_cases=bigger)])
    row.refresh_from_db()
    assert report.updated == ["all-reduce"] and not report.bumped
    assert [c["name"] for c in row.public_cases] == ["dev-fp32", "dev-ragged"]


def test_it_mirrors_tolerances_demo_cases_with_their_bytes_helpers_and_a_starter():
    from problems import get_problem

    spec = get_problem("ep-dispatch")
    problems_sync(catalog=[spec])
    row = Problem.objects.get(slug="ep-dispatch")
    assert [c["name"] for c in row.demo_cases] == [c.name for c in spec.eval_cases]
    first = spec.eval_cases[0]
    assert row.demo_cases[0]["bytes_moved"] == {
        str(w): spec.bytes_moved(first, w) for w in spec.world_sizes
    }
    assert row.tolerances == {d: {"atol": 0.0, "rtol": 0.0} for d in spec.dtypes}  # EXACT
    assert [h["path"] for h in row.helper_modules] == ["problems/expert/_routing_a.py"]
    assert "def sort_by_expert" in row.helper_modules[0]["source"]
    assert "def solution" in row.starter_source and "def sort_by_expert" in row.starter_source
    assert "from problems" not in row.starter_source
    assert problems_sync(catalog=[spec]).unchanged == ["ep-dispatch"]


def _edit_in_the_admin(client, admin, slug: str, **changes) -> None:
    """Post the problem's change form as an admin would, with `changes` over its values."""
    from django.urls import reverse

    row = Problem.objects.get(slug=slug)
    form = {
        "title": row.title,
        "category": row.category,
        "status": row.status,
        "weight": str(row.weight),
        "description": row.description,
        **changes,
    }
    client.force_login(admin)
    response = client.post(reverse("admin:problems_problem_change", args=[row.pk]), form)
    assert response.status_code == 302, response.content.decode()[:2000]


def test_admin_only_fields_are_never_reported_as_updated(client, admin):
    problems_sync(catalog=[FakeSpec("all-reduce")])
    _edit_in_the_admin(client, admin, "all-reduce", status="hidden", weight="3", profiles=["cpu"])
    report = problems_sync(catalog=[FakeSpec("all-reduce")])
    assert report.updated == [] and report.unchanged == ["all-reduce"]
    assert str(report) == "unchanged 1"


def test_an_admins_edit_is_kept_and_reported_while_the_catalog_leaves_the_field_alone(
    client, admin
):
    problems_sync(catalog=[FakeSpec("all-reduce")])
    _edit_in_the_admin(client, admin, "all-reduce", title="All-reduce (the warm-up)")
    report = problems_sync(catalog=[FakeSpec("all-reduce", description="Clearer words.")])
    row = Problem.objects.get(slug="all-reduce")
    assert (row.title, row.description) == ("All-reduce (the warm-up)", "Clearer words.")
    assert report.updated == ["all-reduce"] and report.changes["all-reduce"] == ["description"]
    assert report.kept == ["all-reduce: title"] and report.replaced == []
    assert "updated 1: all-reduce (description)" in str(report)
    assert "admin edits kept 1: all-reduce: title" in str(report)
    again = problems_sync(catalog=[FakeSpec("all-reduce", description="Clearer words.")])
    assert again.unchanged == ["all-reduce"] and again.kept == ["all-reduce: title"]


def test_a_catalog_change_replaces_an_admins_edit_and_says_so(client, admin, capsys):
    problems_sync(catalog=[FakeSpec("all-reduce")])
    _edit_in_the_admin(client, admin, "all-reduce", description="The admin's words.")
    report = problems_sync(catalog=[FakeSpec("all-reduce", description="The catalog's new words.")])
    assert Problem.objects.get(slug="all-reduce").description == "The catalog's new words."
    assert report.replaced == ["all-reduce: description"] and report.kept == []
    assert "ADMIN EDITS REPLACED by the catalog's new text 1: all-reduce: description" in str(
        report
    )
    # From then on the row follows the catalog as before.
    assert problems_sync(
        catalog=[FakeSpec("all-reduce", description="The catalog's new words.")]
    ).unchanged == ["all-reduce"]


def test_the_command_warns_when_it_replaces_an_admins_edit(monkeypatch, capsys):
    import problems as catalog

    spec = next(iter(catalog.all_problems()))
    monkeypatch.setattr(catalog, "all_problems", lambda: [spec])
    call_command("sync_problems")
    Problem.objects.filter(slug=spec.slug).update(title="Edited by an admin")
    monkeypatch.setattr(catalog, "all_problems", lambda: [replace(spec, title="New title")])
    call_command("sync_problems")
    captured = capsys.readouterr()
    assert f"replaced the edit: {spec.slug}: title" in captured.err
    assert Problem.objects.get(slug=spec.slug).title == "New title"
