#!/usr/bin/env python
"""Django's command-line utility for the portal."""

import os
import sys


def main() -> None:
    from portal import envfile

    try:
        # The development `.env` that `make install` and `make run` write; the environment
        # wins over it.
        envfile.load()
    except (OSError, envfile.EnvFileError) as exc:
        sys.exit(f"error: {exc}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    _load_settings(envfile.PATH)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


def _load_settings(dotenv) -> None:
    """Settings that refuse to load (a missing secret, a bad value) stop the command with
    their one-line reason rather than a traceback: it is what a new user sees first."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.INSTALLED_APPS  # noqa: B018 (reading it loads the settings)
    except ImproperlyConfigured as exc:
        hint = ""
        if "PKB_SECRET_KEY" in str(exc) and not dotenv.is_file():
            hint = (
                f"\n(no {dotenv.name} at {dotenv.parent}: for the development setup, "
                "`make install` writes one with debug on and a fresh key; in production, "
                "set PKB_SECRET_KEY or PKB_SECRET_KEY_FILE)"
            )
        sys.exit(f"error: {exc}{hint}")


if __name__ == "__main__":
    main()
