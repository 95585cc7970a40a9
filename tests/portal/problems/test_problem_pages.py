from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_list_shows_published_problems_grouped_by_category(client, problems):
    response = client.get(reverse("problems:list"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "All-reduce (sum)" in page and "Tensor-parallel linear" in page
    assert "Secret op" not in page and "Old op" not in page
    assert page.index("Collective primitives") < page.index("Tensor parallel")
    assert "solution(x: torch.Tensor) -&gt; torch.Tensor" in page


def test_the_list_filters_by_category(client, problems):
    page = client.get(reverse("problems:list"), {"category": "tensor"}).content.decode()
    assert "Tensor-parallel linear" in page
    assert "All-reduce (sum)" not in page


def test_an_unknown_category_shows_everything(client, problems):
    page = client.get(reverse("problems:list"), {"category": "nope"}).content.decode()
    assert "All-reduce (sum)" in page and "Tensor-parallel linear" in page


def test_the_detail_shows_the_reference(client, problems):
    response = client.get(reverse("problems:detail", args=["all-reduce"]))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<pre class="code"><code>def solution(x):' in page
    assert "2, 4, 8" in page and "float32, bfloat16" in page


@pytest.mark.parametrize("slug", ["secret-op", "old-op", "no-such-problem"])
def test_hidden_retired_and_unknown_problems_are_not_found(client, problems, slug):
    assert client.get(reverse("problems:detail", args=[slug])).status_code == 404


def test_staff_do_not_see_hidden_problems_on_the_public_page_either(client, admin, problems):
    client.force_login(admin)
    assert client.get(reverse("problems:detail", args=["secret-op"])).status_code == 404


@pytest.mark.parametrize("name,args", [("problems:list", []), ("problems:detail", ["all-reduce"])])
def test_problem_pages_reject_wrong_method(client, problems, name, args):
    assert client.post(reverse(name, args=args)).status_code == 405


def test_the_admin_lists_and_curates_problems(client, admin, problems):
    client.force_login(admin)
    url = reverse("admin:problems_problem_changelist")
    assert client.get(url).status_code == 200
    response = client.post(
        url, {"action": "retire", "_selected_action": [problems["all-reduce"].pk]}
    )
    assert response.status_code == 302
    problems["all-reduce"].refresh_from_db()
    assert problems["all-reduce"].status == "retired"


def test_code_spans_in_descriptions_are_shown_as_code_and_html_is_escaped(client, problems):
    problems["all-reduce"].description = "Sum `x` over ranks. <script>alert(1)</script>"
    problems["all-reduce"].save()
    page = client.get(reverse("problems:detail", args=["all-reduce"])).content.decode()
    assert "Sum <code>x</code> over ranks." in page
    assert "<script>alert(1)</script>" not in page


def test_the_detail_shows_the_public_cases_sizes(client, problems):
    row = problems["all-reduce"]
    row.public_cases = [{"name": "dev-ragged", "dtype": "float32", "params": {"n": 7, "skew": 90}}]
    row.save()
    page = client.get(reverse("problems:detail", args=["all-reduce"])).content.decode()
    assert 'id="public-cases"' in page
    assert "<code>dev-ragged</code>" in page and "<code>skew=90</code>" in page
