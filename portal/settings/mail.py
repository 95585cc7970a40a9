"""Mail: what the portal sends and through which server."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from portal.settings.env import envbool, envint, envstr

# Mail: "your submission is judged" to a team's members who gave an email, and password
# resets. The console backend (the default) prints each mail in the process that sends it;
# production sets smtp and the server's address. Links in mail need the site's address,
# which a Celery worker has no request to take it from.
_EMAIL_BACKENDS = {
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
}
_email_backend = envstr("PKB_EMAIL_BACKEND", "console") or "console"
if _email_backend not in _EMAIL_BACKENDS:
    raise ImproperlyConfigured(f"PKB_EMAIL_BACKEND={_email_backend!r}: expected console or smtp")
EMAIL_BACKEND = _EMAIL_BACKENDS[_email_backend]
EMAIL_HOST = envstr("PKB_EMAIL_HOST", "localhost") or "localhost"
EMAIL_PORT = envint("PKB_EMAIL_PORT", 587)
EMAIL_HOST_USER = envstr("PKB_EMAIL_USER", "") or ""
EMAIL_HOST_PASSWORD = envstr("PKB_EMAIL_PASSWORD", "") or ""
EMAIL_USE_TLS = envbool("PKB_EMAIL_STARTTLS", True)
# A mail server that does not answer holds the sender this long at most: the portal's
# worker sends "judged" mail after recording, before its next message.
EMAIL_TIMEOUT = envint("PKB_EMAIL_TIMEOUT_S", 10)
DEFAULT_FROM_EMAIL = envstr("PKB_EMAIL_FROM", "pkb@localhost") or "pkb@localhost"
SERVER_EMAIL = DEFAULT_FROM_EMAIL
PKB_SITE_URL = (envstr("PKB_SITE_URL", "http://127.0.0.1:8000") or "").rstrip("/")
if not PKB_SITE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"PKB_SITE_URL={PKB_SITE_URL!r}: expected http(s)://host[:port]")
if EMAIL_TIMEOUT <= 0:
    raise ImproperlyConfigured("PKB_EMAIL_TIMEOUT_S must be positive")
