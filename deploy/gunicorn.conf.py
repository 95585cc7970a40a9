"""gunicorn's settings for the portal: `gunicorn -c deploy/gunicorn.conf.py`.

Behind the TLS proxy (deploy/nginx.conf), which buffers slow clients, so plain sync
workers are enough. Each value can be changed from the environment.
"""

from __future__ import annotations

import multiprocessing
import os

wsgi_app = "portal.wsgi:application"
bind = os.environ.get("PKB_BIND", "127.0.0.1:8000")
# gunicorn's own advice is 2-4 per core; the leaderboard is memoised per process, so
# fewer, longer-lived processes rebuild it less often.
workers = int(os.environ.get("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 9)))
# A 4 MiB bundle upload over a slow link is buffered by the proxy, not by this timeout.
timeout = int(os.environ.get("PKB_WEB_TIMEOUT_S", "60"))
graceful_timeout = 30
# Recycle a process now and then: a slow leak never grows for long.
max_requests = 2000
max_requests_jitter = 200
# gunicorn's default, stated: the API schema documents the 414 it answers past it
# (portal/api/schema.py). No query of the API needs more.
limit_request_line = 4094
accesslog = "-"
errorlog = "-"
# The proxy's address: only its X-Forwarded-* headers are believed.
forwarded_allow_ips = os.environ.get("PKB_FORWARDED_ALLOW_IPS", "127.0.0.1")
# Heartbeat files in memory, not on a container's overlay disk (gunicorn's advice).
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"
