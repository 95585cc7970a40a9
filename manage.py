#!/usr/bin/env python
"""Django's command-line utility for the portal."""

import os
import sys


def main() -> None:
    from portal import envfile

    try:
        # The development `.env` that `make run` writes; the environment wins over it.
        envfile.load()
    except (OSError, envfile.EnvFileError) as exc:
        sys.exit(f"error: {exc}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
