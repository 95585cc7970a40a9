"""The worker host's side: the Celery task (`tasks`), settings, hardware profiles, the
host plan, liveness of workers, the environment fingerprint, and the sandbox that confines
every process running bundle code (`sandbox`). Trusted code; it never imports bundle code."""
