"""The `.env` file at the repository root, as manage.py reads it.

`make run` (or `make migrate`) writes it when it is missing, for the embedded setup:
`PKB_DEBUG=1` and a fresh `PKB_SECRET_KEY` (scripts/ensure-env; never committed). honcho
reads it for the processes of `make run`; manage.py reads it too, so that the README's
`manage.py` commands work in any shell. Production has no `.env`: its settings come from
the environment (deploy/), and without a secret key the settings still refuse to load.

The file only puts strings into the environment; portal/settings/ reads and checks
them as it reads every other variable. Lines are `NAME=value`, `# comments` and blank
lines. A value is bare (no spaces, quotes, `#` or backslashes) or wholly in single or
double quotes; anything else is refused with its line, rather than read one way here
and another way by honcho.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from pathlib import Path

PATH = Path(__file__).resolve().parent.parent / ".env"

_LINE = re.compile(
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_]*)=
        (?: "(?P<double>[^"\\]*)" | '(?P<single>[^']*)' | (?P<bare>[^\s"'\#\\]*) )""",
    re.VERBOSE,
)


class EnvFileError(ValueError):
    """A line of the file that is not `NAME=value`."""


def parse(text: str, source: str = ".env") -> dict[str, str]:
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise EnvFileError(
                f"{source}, line {number}: expected NAME=value (a bare value, or one in "
                f"quotes), got {raw!r}"
            )
        value = match["double"] if match["double"] is not None else match["single"]
        values[match["name"]] = value if value is not None else match["bare"]
    return values


def _already_set(name: str, environ: MutableMapping[str, str]) -> bool:
    """Set in the environment, itself or as its other form (NAME and NAME_FILE, the two
    ways settings take a secret: the environment's wins, and never both at once)."""
    base = name.removesuffix("_FILE")
    return name in environ or base in environ or f"{base}_FILE" in environ


def load(path: Path = PATH, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Add the file's variables that the environment does not set already; what it added.

    Nothing under pytest (PYTEST_VERSION): the suite's settings never depend on a
    developer's `.env`.
    """
    environ = os.environ if environ is None else environ
    if environ.get("PYTEST_VERSION") or not path.is_file():
        return {}
    added = {
        name: value
        for name, value in parse(path.read_text(), str(path)).items()
        if not _already_set(name, environ)
    }
    environ.update(added)
    return added
