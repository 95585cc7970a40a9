"""Settings of the portal, all read from the environment.

Defaults give the embedded setup: SQLite under var/, a local Redis, the CPU profile.
A bad value fails at start-up rather than later at run time.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evaluator.contract import PORTAL_QUEUE
from evaluator.host.profiles import DEFAULT_PROFILE, PROFILES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

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


DEBUG = envbool("PKB_DEBUG", False)
# pytest (>= 8.2) sets PYTEST_VERSION for its run and every process it starts. Tests run
# with production settings except for two things they cannot have: a secret and a
# collectstatic manifest.
TESTING = bool(os.environ.get("PYTEST_VERSION"))

SECRET_KEY = envstr("PKB_SECRET_KEY")
if not SECRET_KEY:
    if not (DEBUG or TESTING):
        raise ImproperlyConfigured("PKB_SECRET_KEY (or PKB_SECRET_KEY_FILE) is required")
    SECRET_KEY = "insecure-dev-and-test-key-never-use-in-production"

ALLOWED_HOSTS = envlist("PKB_ALLOWED_HOSTS", "localhost,127.0.0.1")
CSRF_TRUSTED_ORIGINS = envlist("PKB_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by this site (no CDN)
    "portal.accounts",
    "portal.problems",
    "portal.submissions",
    "portal.leaderboard",
    "portal.api",
    "portal.ops",
    "portal.entries",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
if not DEBUG:
    # Right after SecurityMiddleware, as whitenoise asks.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=envint("PKB_DB_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so that a Celery worker started by a test shares the test DB.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    # Web and worker processes write concurrently; wait for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "leaderboard:home"
LOGOUT_REDIRECT_URL = "leaderboard:home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Production keeps both outside the checkout (deploy/portal.env.example): collectstatic
# writes STATIC_ROOT, stored bundles live under MEDIA_ROOT (back it up).
STATIC_ROOT = Path(envstr("PKB_STATIC_ROOT") or VAR_DIR / "static")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns at start-up when missing
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_URL = "media/"  # never served: bundles are private, read through the portal only
MEDIA_ROOT = Path(envstr("PKB_MEDIA_ROOT") or VAR_DIR / "media")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG or TESTING
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# Off by default so that the embedded setup works over plain http://localhost; production
# behind an HTTPS proxy sets PKB_SECURE_COOKIES=true.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = envbool("PKB_SECURE_COOKIES", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# HSTS and the redirect to HTTPS, for production behind the TLS proxy (both off for
# http://localhost). The load balancer's health check and Prometheus's scrape may come over
# plain HTTP from inside: they are never redirected.
SECURE_HSTS_SECONDS = envint("PKB_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("PKB_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = envbool("PKB_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = envbool("PKB_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^health/$", r"^metrics$"]
if SECURE_HSTS_SECONDS < 0:
    raise ImproperlyConfigured("PKB_HSTS_SECONDS must be 0 (off) or positive")

# Bundles: the evaluator's own checks decide what is inside; this caps what is read at all.
PKB_BUNDLE_MAX_BYTES = 4 * 1024 * 1024
# Uploads up to the bundle limit stay in memory; bigger ones spill to a temporary file and
# are rejected before being read in full.
FILE_UPLOAD_MAX_MEMORY_SIZE = PKB_BUNDLE_MAX_BYTES
# Larger uploads spill to files named after their process: a web process that starts
# removes those of processes that are gone (portal/submissions/uploads.py).
FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "portal.submissions.uploads.OwnedUploadHandler",
]
# Those temporary files live in a folder of the portal's own, where each web process removes
# the ones a killed process left behind when it starts (portal/submissions/uploads.py).
FILE_UPLOAD_TEMP_DIR = Path(envstr("PKB_UPLOAD_TEMP_DIR") or VAR_DIR / "uploads")
try:
    FILE_UPLOAD_TEMP_DIR.mkdir(parents=True, exist_ok=True)
except OSError as exc:
    raise ImproperlyConfigured(
        f"PKB_UPLOAD_TEMP_DIR: cannot create {FILE_UPLOAD_TEMP_DIR} ({exc.strerror}); "
        "point it at a folder the portal's user may write"
    ) from None
# Non-file request data (the REST API may send a bundle base64-encoded: 4/3 of its size).
DATA_UPLOAD_MAX_MEMORY_SIZE = PKB_BUNDLE_MAX_BYTES * 4 // 3 + 64 * 1024

PKB_SUBMISSION_PROFILE = envstr("PKB_SUBMISSION_PROFILE", DEFAULT_PROFILE) or DEFAULT_PROFILE
if PKB_SUBMISSION_PROFILE not in PROFILES:
    raise ImproperlyConfigured(
        f"PKB_SUBMISSION_PROFILE={PKB_SUBMISSION_PROFILE!r}: expected one of "
        + ", ".join(sorted(PROFILES))
    )

# Leaderboard: each process rebuilds the boards it serves as soon as their data change
# (a rebuild of 1,000 teams takes most of a second; the page's goal is 50 ms), so the next
# view is fresh and memoised (portal/leaderboard/freshness.py). Off in tests: their writes
# are never committed, and a watcher thread would outlive their database.
PKB_LEADERBOARD_REBUILD_ON_CHANGE = envbool("PKB_LEADERBOARD_REBUILD_ON_CHANGE", not TESTING)

# Liveness (docs/recovery.md). An evaluator host sends a heartbeat every PKB_HEARTBEAT_S
# while it evaluates (the evaluator reads the same variable); the sweeper runs every
# PKB_SWEEP_INTERVAL_S and requeues a running evaluation silent for PKB_STUCK_AFTER_S, up
# to PKB_MAX_ATTEMPTS attempts in all. A killed host's work is therefore queued again
# within heartbeat + stuck + sweep = 10 + 60 + 15 s by default (the issue asks for 2 min).
# Redis hands an unacknowledged message out again after PKB_VISIBILITY_TIMEOUT_S; the
# evaluator keeps its running message's deadline fresh on every heartbeat, so the timeout
# is sized from the heartbeat, not from the longest evaluation.
PKB_HEARTBEAT_S = envint("PKB_HEARTBEAT_S", 10)
PKB_STUCK_AFTER_S = envint("PKB_STUCK_AFTER_S", 60)
PKB_SWEEP_INTERVAL_S = envint("PKB_SWEEP_INTERVAL_S", 15)
PKB_VISIBILITY_TIMEOUT_S = envint("PKB_VISIBILITY_TIMEOUT_S", 60)
PKB_MAX_ATTEMPTS = envint("PKB_MAX_ATTEMPTS", 3)
# A submission whose hardware profile has no worker says so on its page, and fails with
# that reason once it has waited this long with no such worker seen.
PKB_NO_WORKER_WAIT_S = envint("PKB_NO_WORKER_WAIT_S", 3600)
if min(PKB_HEARTBEAT_S, PKB_SWEEP_INTERVAL_S, PKB_MAX_ATTEMPTS, PKB_NO_WORKER_WAIT_S) <= 0:
    raise ImproperlyConfigured(
        "PKB_HEARTBEAT_S, PKB_SWEEP_INTERVAL_S, PKB_MAX_ATTEMPTS and PKB_NO_WORKER_WAIT_S "
        "must be positive"
    )
# Two heartbeats may be late (a busy portal queue) before a live host looks dead.
if PKB_STUCK_AFTER_S < 3 * PKB_HEARTBEAT_S or PKB_VISIBILITY_TIMEOUT_S < 3 * PKB_HEARTBEAT_S:
    raise ImproperlyConfigured(
        "PKB_STUCK_AFTER_S and PKB_VISIBILITY_TIMEOUT_S must be at least 3 x PKB_HEARTBEAT_S"
    )

# Per team, so that one team cannot fill the GPU queue: runs of each mode in the last hour
# and the last 24 hours (0 per hour: no hourly limit), and submissions queued or running at
# once, all modes together (web form, API and pkb alike; portal/submissions/quotas.py).
# Test runs are short (dev cases, no timing) and meant to be many; benchmark and profile
# runs take a host as long as a ranked one. Ranked runs per day keep their older name.
PKB_SUBMISSIONS_PER_DAY = envint("PKB_SUBMISSIONS_PER_DAY", 20)
PKB_RANKED_RUNS_PER_HOUR = envint("PKB_RANKED_RUNS_PER_HOUR", 0)
PKB_TEST_RUNS_PER_HOUR = envint("PKB_TEST_RUNS_PER_HOUR", 30)
PKB_TEST_RUNS_PER_DAY = envint("PKB_TEST_RUNS_PER_DAY", 200)
PKB_BENCHMARK_RUNS_PER_HOUR = envint("PKB_BENCHMARK_RUNS_PER_HOUR", 6)
PKB_BENCHMARK_RUNS_PER_DAY = envint("PKB_BENCHMARK_RUNS_PER_DAY", 30)
PKB_PROFILE_RUNS_PER_HOUR = envint("PKB_PROFILE_RUNS_PER_HOUR", 4)
PKB_PROFILE_RUNS_PER_DAY = envint("PKB_PROFILE_RUNS_PER_DAY", 20)
PKB_MAX_ACTIVE_SUBMISSIONS = envint("PKB_MAX_ACTIVE_SUBMISSIONS", 2)
_DAILY = (PKB_SUBMISSIONS_PER_DAY, PKB_TEST_RUNS_PER_DAY, PKB_BENCHMARK_RUNS_PER_DAY)
if min(*_DAILY, PKB_PROFILE_RUNS_PER_DAY, PKB_MAX_ACTIVE_SUBMISSIONS) <= 0:
    raise ImproperlyConfigured(
        "PKB_SUBMISSIONS_PER_DAY, PKB_TEST_RUNS_PER_DAY, PKB_BENCHMARK_RUNS_PER_DAY, "
        "PKB_PROFILE_RUNS_PER_DAY and PKB_MAX_ACTIVE_SUBMISSIONS must be positive"
    )
_HOURLY = (PKB_RANKED_RUNS_PER_HOUR, PKB_TEST_RUNS_PER_HOUR, PKB_BENCHMARK_RUNS_PER_HOUR)
if min(*_HOURLY, PKB_PROFILE_RUNS_PER_HOUR) < 0:
    raise ImproperlyConfigured(
        "PKB_RANKED_RUNS_PER_HOUR, PKB_TEST_RUNS_PER_HOUR, PKB_BENCHMARK_RUNS_PER_HOUR and "
        "PKB_PROFILE_RUNS_PER_HOUR must be 0 (no hourly limit) or positive"
    )

# Model and agent entries (portal/entries): an evaluation sends its samples in batches, so
# an entry has a quota of its own instead of the team's, PKB_ENTRY_SAMPLES_PER_DAY samples
# (bundles) in any 24 hours, all of a batch queued at once; and declares at most
# PKB_ENTRY_MAX_SAMPLES samples per problem, which bounds what one entry costs the hosts.
PKB_ENTRY_SAMPLES_PER_DAY = envint("PKB_ENTRY_SAMPLES_PER_DAY", 40)
PKB_ENTRY_MAX_SAMPLES = envint("PKB_ENTRY_MAX_SAMPLES", 20)
if PKB_ENTRY_SAMPLES_PER_DAY <= 0 or PKB_ENTRY_MAX_SAMPLES <= 0:
    raise ImproperlyConfigured(
        "PKB_ENTRY_SAMPLES_PER_DAY and PKB_ENTRY_MAX_SAMPLES must be positive"
    )

# Re-runs for the ranking: every PKB_RERUN_EVERY_S the beat judges each published problem's
# top PKB_RERUN_TOP entries again with fresh seeds, until each has PKB_RERUN_RUNS judged
# runs; boards rank by the runs' medians. Off unless PKB_RERUN_ENABLED (it costs GPU time).
PKB_RERUN_ENABLED = envbool("PKB_RERUN_ENABLED", False)
PKB_RERUN_TOP = envint("PKB_RERUN_TOP", 3)
PKB_RERUN_RUNS = envint("PKB_RERUN_RUNS", 3)
PKB_RERUN_EVERY_S = envint("PKB_RERUN_EVERY_S", 3600)
if min(PKB_RERUN_TOP, PKB_RERUN_RUNS, PKB_RERUN_EVERY_S) <= 0:
    raise ImproperlyConfigured(
        "PKB_RERUN_TOP, PKB_RERUN_RUNS and PKB_RERUN_EVERY_S must be positive"
    )

REDIS_URL = envstr("REDIS_URL", "redis://127.0.0.1:6379/0")
if TESTING:
    # A Redis database of the suite's own: a developer's running site and the tests never
    # take each other's messages, and the integration tests may empty it.
    REDIS_URL = envstr("PKB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

# Celery (read by portal/celery.py through the CELERY_ namespace).
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = PORTAL_QUEUE
CELERY_TASK_ROUTES = {"portal.*": {"queue": PORTAL_QUEUE}}
# Every consumer of the Redis database restores any message unacknowledged for longer
# than its own visibility timeout, the evaluator's included: portal and evaluator must
# agree on it (evaluator.host.tasks reads the same variable). Checked every 5 s, not kombu's
# default 10 x 10 s, so that a killed worker's message comes back promptly.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": PKB_VISIBILITY_TIMEOUT_S,
    "unacked_restore_interval": 5,
    "unacked_restore_throttle": 1,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "sweep-submissions": {"task": "portal.sweep", "schedule": float(PKB_SWEEP_INTERVAL_S)},
    "retention": {"task": "portal.retention", "schedule": 3600.0},
    # Queues nothing unless PKB_RERUN_ENABLED (portal/leaderboard/reruns.py).
    "rerun-top": {"task": "portal.rerun_top", "schedule": float(PKB_RERUN_EVERY_S)},
}
CELERY_TIMEZONE = TIME_ZONE


_RATE_PERIODS = {"s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day"}


def envrate(name: str, default: str) -> str:
    """A DRF throttle rate such as 120/min (per s, min, hour or day)."""
    value = envstr(name, default) or default
    count, _, period = value.partition("/")
    if not count.isdigit() or period not in _RATE_PERIODS:
        raise ImproperlyConfigured(f"{name}={value!r}: expected N/s, N/min, N/hour or N/day")
    return value


# API throttling. Counters live in Redis (the cache "throttle") so that all web processes
# share them; PKB_API_NUM_PROXIES says how many proxies in front append to
# X-Forwarded-For (0: trust only the socket's address, as `make run` serves directly).
PKB_API_RATE = envrate("PKB_API_RATE", "120/min")
PKB_API_ANON_RATE = envrate("PKB_API_ANON_RATE", "60/min")
PKB_API_NUM_PROXIES = envint("PKB_API_NUM_PROXIES", 0)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "pkb-throttle",
        # A slow Redis must not hold an API request for long; the throttle then lets it by.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    },
}

REST_FRAMEWORK = {
    # Token first: its challenge makes a missing or bad credential a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.TeamTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.api.throttling.UserRateThrottle",
        "portal.api.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"user": PKB_API_RATE, "anon": PKB_API_ANON_RATE},
    "NUM_PROXIES": PKB_API_NUM_PROXIES,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "pkb: multi-GPU kernel leaderboard API",
    "DESCRIPTION": (
        "Problems, leaderboards, submissions and teams. Authenticate with a team API token "
        "(`Authorization: Token <secret>`, created on the Team page) or a browser session."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,  # a multipart upload's request body differs from its reply
    # The 400/401/404/429 bodies that DRF sends on its own, on every operation they can reach.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.api.schema.document_error_responses",
    ],
    # Two models have a `status`: name their enums rather than let a hash tell them apart.
    "ENUM_NAME_OVERRIDES": {
        "SubmissionStatusEnum": "portal.submissions.models.Submission.Status",
        "ProblemResultStatusEnum": "portal.submissions.models.ProblemResult.Status",
    },
}

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

# Retention (portal/ops/retention.py, hourly on the beat): logs of results, and bundles
# that nothing can rank, re-judge or publish, are deleted this many days after their
# submission finished; results are kept. 0 keeps everything.
PKB_RETENTION_DAYS = envint("PKB_RETENTION_DAYS", 0)
if PKB_RETENTION_DAYS < 0:
    raise ImproperlyConfigured("PKB_RETENTION_DAYS must be 0 (keep everything) or positive")
# Prometheus scrapes /metrics with this bearer token; unset, /metrics is open (keep it off
# the public proxy then, as deploy/nginx.conf does).
PKB_METRICS_TOKEN = envstr("PKB_METRICS_TOKEN")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("PKB_LOG_LEVEL", "INFO")},
}
