"""Settings of the portal, all read from the environment.

Defaults give the embedded setup: SQLite under var/, a local Redis, the CPU profile.
A bad value fails at start-up rather than later at run time (`env.py` reads the values).
Here: Django, storage, security, uploads, Celery, the API; what the portal asks of hosts
and teams (liveness, quotas, entries, re-runs) is in `judging.py`, mail in `mail.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evaluator.face import DEFAULT_PROFILE, PORTAL_QUEUE, PROFILES
from portal.settings.env import envbool, envint, envlist, envrate, envstr
from portal.settings.judging import *  # noqa: F403  (liveness, quotas, entries, re-runs)
from portal.settings.judging import (
    PKB_RERUN_EVERY_S,
    PKB_SWEEP_INTERVAL_S,
    PKB_VISIBILITY_TIMEOUT_S,
)
from portal.settings.mail import *  # noqa: F403

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

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

# A result judged without the sandbox its hardware profile requires (bubblewrap, the
# candidate frozen while the reference is timed: evaluator/host/profiles.py) is flagged
# when it is recorded and never ranks (portal/submissions/services/confinement.py), except
# on the profiles named here: a development setting, for a host that cannot give that
# sandbox (`make run` names "cpu": its worker may run without root or a freezer). Empty
# by default: no profile ranks such a result unless an operator says so.
PKB_RANK_WEAKER_SANDBOX = tuple(envlist("PKB_RANK_WEAKER_SANDBOX", ""))
if unknown := sorted(set(PKB_RANK_WEAKER_SANDBOX) - set(PROFILES)):
    raise ImproperlyConfigured(
        f"PKB_RANK_WEAKER_SANDBOX names unknown profiles {', '.join(unknown)}; expected some "
        "of " + ", ".join(sorted(PROFILES))
    )

# Leaderboard: each process rebuilds the boards it serves as soon as their data change
# (a rebuild of 1,000 teams takes most of a second; the page's goal is 50 ms), so the next
# view is fresh and memoised (portal/leaderboard/freshness.py). Off in tests: their writes
# are never committed, and a watcher thread would outlive their database.
PKB_LEADERBOARD_REBUILD_ON_CHANGE = envbool("PKB_LEADERBOARD_REBUILD_ON_CHANGE", not TESTING)

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
    # DRF's three, with a JSON parser that refuses a body nested too deeply (a 400, not a 500).
    "DEFAULT_PARSER_CLASSES": [
        "portal.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
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
