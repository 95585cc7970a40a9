"""Request rates of the API, counted in Redis so that every web process shares the count.

The rates come from settings (PKB_API_RATE, PKB_API_ANON_RATE). A 429 carries
Retry-After (DRF sets it from `wait()`).
"""

from __future__ import annotations

import logging

from django.core.cache import caches
from rest_framework import throttling

logger = logging.getLogger(__name__)

CACHE_ALIAS = "throttle"


class _SharedCounter:
    """Counts in the shared cache; if that cache is down, lets requests through.

    An outage of the throttle's store should not take the API down with it: the throttle
    protects the site from a runaway client, the site's availability matters more.
    """

    cache = caches[CACHE_ALIAS]

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)  # type: ignore[misc]
        except Exception:  # the cache backend's connection errors have no common base
            logger.exception("API throttle: the counter store failed; request let through")
            return True


class UserRateThrottle(_SharedCounter, throttling.UserRateThrottle):
    """Per user (session or token; a user's tokens share one budget). PKB_API_RATE."""

    scope = "user"


class AnonRateThrottle(_SharedCounter, throttling.AnonRateThrottle):
    """Per client address for requests without credentials. PKB_API_ANON_RATE."""

    scope = "anon"
