"""`pkb download`: a submission's artifacts (a profile run's traces and tables) saved into
a folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import quote

from portal.cli.commands import common
from portal.cli.commands.common import CUT, EXIT_OK, TRACE_HELP, UsageError, err
from portal.formats import file_size


def cmd_download(args: argparse.Namespace) -> int:
    """Write the submission's artifacts (all, or the ones named) into a folder."""
    client = common.client(args, need_token=True)
    submission = client.get(f"submissions/{args.id}/")
    artifacts = {a["name"]: a for a in submission.get("artifacts", [])}
    names = args.names or sorted(artifacts)
    unknown = [n for n in names if n not in artifacts]
    if unknown:
        known = ", ".join(sorted(artifacts)) or "none"
        raise UsageError(f"#{args.id} has no artifact {unknown[0]!r} (it has: {known})")
    folder = Path(args.to)
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not artifacts[name].get("url"):
            err().print(f"{name}: its file was deleted with the run's other old data")
            continue
        # A plain name (the site checked it), and taken as one: never a path out of `folder`.
        target = folder / Path(name).name
        target.write_bytes(client.download(f"submissions/{args.id}/artifacts/{quote(name)}/"))
        cut = CUT if artifacts[name]["truncated"] else ""
        err().print(f"{target}: {file_size(target.stat().st_size)}{cut}")
    if any(n.endswith(".trace.json") for n in names):
        err().print(TRACE_HELP)
    return EXIT_OK
