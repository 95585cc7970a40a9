"""Site-wide views that belong to no app: the error pages and the favicon."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, HttpResponseServerError
from django.template import loader
from django.templatetags.static import static

logger = logging.getLogger(__name__)

# What is left when even the 500 page cannot render (a broken URL configuration, a static
# manifest missing after a deploy): the same words, without the chrome.
_PLAIN_500 = (
    "<!doctype html><title>Server error</title><h1>Something went wrong on our side</h1>"
    "<p>The error is logged. Try again in a minute.</p>"
)


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 page in the site's layout, rendered without the request's context: the
    database, the session or a context processor may be what failed."""
    try:
        return HttpResponseServerError(loader.render_to_string("500.html"))
    except Exception:
        logger.exception("the 500 page failed to render; sent the plain one")
        return HttpResponseServerError(_PLAIN_500)


def favicon(request: HttpRequest) -> HttpResponse:
    # Browsers and crawlers ask for /favicon.ico whatever the page links; send them to the
    # static file (whitenoise serves it, under its hashed name in production).
    return HttpResponseRedirect(static("favicon.svg"))
