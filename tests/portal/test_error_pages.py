"""The 404 and 500 pages in the site's layout, and the favicon. Tests run with debug off,
as production does, so Django serves these templates here as it does there."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import path

from portal import views
from portal.urls import urlpatterns as site_urlpatterns


def _broken(request):
    raise RuntimeError("a view that fails")


# The site's URLs plus one that fails, for the 500 page (pytest.mark.urls below).
urlpatterns = [*site_urlpatterns, path("broken/", _broken)]
handler500 = "portal.views.server_error"


@pytest.mark.django_db
def test_an_unknown_page_is_a_404_in_the_sites_layout(client, alice):
    client.force_login(alice)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "Page not found" in body and "<code>/no-such-page/</code>" in body
    assert 'class="site-header"' in body and 'class="site-footer"' in body
    assert ">alice</a>" in body  # the header knows who is signed in
    assert "Django tried these URL patterns" not in body


@pytest.mark.django_db
def test_a_hidden_problem_is_the_same_404_as_an_unknown_one(client, problems):
    response = client.get("/problems/secret-op/")
    assert response.status_code == 404 and "Page not found" in response.content.decode()


@pytest.mark.urls(__name__)
def test_a_failing_view_gets_the_500_page_in_the_sites_layout_without_the_database():
    # No django_db mark: any query the page made would fail the test.
    response = Client(raise_request_exception=False).get("/broken/")
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on our side" in body
    assert 'class="site-header"' in body and "css/site" in body
    assert "Log in" in body  # rendered without the request: nobody is signed in there


def test_the_500_page_falls_back_to_plain_html_when_it_cannot_render(monkeypatch, rf):
    def fail(*args, **kwargs):
        raise LookupError("no static manifest")

    monkeypatch.setattr(views.loader, "render_to_string", fail)
    response = views.server_error(rf.get("/"))
    assert response.status_code == 500
    assert b"Something went wrong on our side" in response.content


@pytest.mark.django_db
def test_every_page_links_the_favicon_and_favicon_ico_leads_to_it(client):
    body = client.get("/accounts/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in body
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == "/static/favicon.svg"
