"""Reading the portal's settings from the environment: a bad value fails at start-up
(ImproperlyConfigured), naming the variable and what it expects."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: expected one of true/false/1/0/yes/no")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected an integer") from None


def envstr(name: str, default: str | None = None) -> str | None:
    """NAME, or the content of the file named by NAME_FILE (for secrets); never both."""
    value = os.environ.get(name)
    path = os.environ.get(f"{name}_FILE")
    if value and path:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r}: {exc}") from None
    return value or default


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in (envstr(name) or default).split(",") if item.strip()]


_RATE_PERIODS = {"s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day"}


def envrate(name: str, default: str) -> str:
    """A DRF throttle rate such as 120/min (per s, min, hour or day)."""
    value = envstr(name, default) or default
    count, _, period = value.partition("/")
    if not count.isdigit() or period not in _RATE_PERIODS:
        raise ImproperlyConfigured(f"{name}={value!r}: expected N/s, N/min, N/hour or N/day")
    return value
