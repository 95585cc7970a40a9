"""`pkb entry ...` and `pkb submit --entry NAME --samples DIR`: a model evaluation's harness
registers its entry, sends its samples as one batch and follows it unattended.

`pkb entry register` and `pkb entry status` are here; `pkb submit`'s side is in submit.py."""

from __future__ import annotations

import argparse
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

from rich.table import Table

from portal.cli.client import Client
from portal.cli.commands import common
from portal.cli.commands.common import EXIT_OK, err, out

SAMPLE_NAME = re.compile(r"sample_(\d+)(\.zip|\.tar\.gz|\.tgz)?$")
FINISHED = {"done", "failed", "cancelled"}


class SamplesError(Exception):
    """The samples folder is not as `pkb submit --samples` wants it."""


def _zip_folder(folder: Path) -> bytes:
    """A bundle folder as a .zip, its files at the archive's root as a bundle wants them;
    caches and hidden files left out."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_file() and not any(p.startswith((".", "__pycache__")) for p in rel.parts):
                archive.write(path, rel.as_posix())
    return buffer.getvalue()


def read_samples(folder: Path) -> list[tuple[str, bytes]]:
    """DIR's sample_1, sample_2, ... (each a bundle folder or archive) in their order, as
    (file name, bytes) ready to upload."""
    if not folder.is_dir():
        raise SamplesError(f"{folder}: no such folder")
    found: dict[int, Path] = {}
    for path in folder.iterdir():
        match = SAMPLE_NAME.fullmatch(path.name)
        if match is None:
            continue
        number = int(match.group(1))
        if number in found:
            raise SamplesError(f"{folder}: sample_{number} is there twice ({path.name})")
        found[number] = path
    if not found:
        raise SamplesError(
            f"{folder} holds no sample: expected sample_1/, sample_2/, ... (bundle folders) "
            "or sample_1.zip, sample_2.zip, ..."
        )
    samples = []
    for number in sorted(found):
        path = found[number]
        data = _zip_folder(path) if path.is_dir() else path.read_bytes()
        name = f"sample_{number}.zip" if path.is_dir() else path.name
        samples.append((name, data))
    return samples


def submit_samples(client: Client, entry: str, samples: list[tuple[str, bytes]]) -> dict:
    files = [("samples", (name, data, "application/octet-stream")) for name, data in samples]
    return client.post(f"entries/{entry}/samples/", files=files)


def entry_status(client: Client, entry: str, *, batch: int | None = None) -> dict:
    path = f"entries/{entry}/batches/{batch}/" if batch else f"entries/{entry}/"
    return client.get(path)


def register(client: Client, args: argparse.Namespace) -> dict:
    body: dict[str, Any] = {
        "name": args.name,
        "kind": args.kind,
        "model_name": args.model,
        "samples_per_problem": args.samples,
        "k": args.k,
    }
    optional = {
        "slug": args.slug,
        "model_version": args.model_version,
        "harness": args.harness,
        "sampling": args.sampling,
        "note": args.note,
        "evaluated_on": args.date,
    }
    body.update({key: value for key, value in optional.items() if value})
    return client.post("entries/", json=body)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def status_table(status: dict) -> Table:
    entry, scores = status["entry"], status["scores"]
    k = scores["k"]
    table = common.table(
        "problem", "sent", "n", "c", "pass@1", f"pass@{k}", "fast_1@1", f"fast_1@{k}",
        title=f"{entry['name']} ({entry['kind']}), n={entry['samples_per_problem']} k={k}, "
        f"profile {status['profile']}",
    )  # fmt: skip
    for p in scores["problems"]:
        table.add_row(
            p["problem"],
            str(p["sent"]),
            str(p["n"]),
            str(p["c"]),
            _share(p["pass_at_1"]),
            _share(p["pass_at_k"]),
            _share(p["fast_1_at_1"]),
            _share(p["fast_1_at_k"]),
        )
    table.add_row(
        "all",
        str(scores["sent"]),
        str(scores["judged"]),
        "",
        _share(scores["pass_at_1"]),
        _share(scores["pass_at_k"]),
        _share(scores["fast_1_at_1"]),
        _share(scores["fast_1_at_k"]),
        style="bold",
    )
    return table


def summary(status: dict) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in status["counts"].items() if n)
    state = "finished" if status["finished"] else "in progress"
    return f"{len(status['samples'])} sample(s): {counts or 'none'} ({state})"


def dumps(status: dict) -> str:
    return json.dumps(status, indent=2, sort_keys=True)


def print_status(status: dict, *, as_json: bool) -> None:
    """An entry's or a batch's status: as JSON for a harness, else a summary and a table."""
    if as_json:
        out().print(dumps(status))
    else:
        out().print(summary(status))
        out().print(status_table(status))


def cmd_entry_register(args: argparse.Namespace) -> int:
    client = common.client(args, need_token=True)
    entry = register(client, args)
    err().print(
        f"Registered {entry['kind']} entry {entry['slug']} for {entry['team_name']}: "
        f"n={entry['samples_per_problem']}, k={entry['k']}. {entry['html_url']}"
    )
    return EXIT_OK


def cmd_entry_status(args: argparse.Namespace) -> int:
    print_status(entry_status(common.client(args), args.name), as_json=args.json)
    return EXIT_OK
