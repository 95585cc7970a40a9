"""Where `pkb login` keeps the site's address and the token: a JSON file only you can read."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8000"


class ConfigError(Exception):
    pass


def config_path() -> Path:
    """$PKB_CONFIG, else $XDG_CONFIG_HOME/pkb/config.json, else ~/.config/pkb/config.json."""
    if os.environ.get("PKB_CONFIG"):
        return Path(os.environ["PKB_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "pkb" / "config.json"


@dataclass(frozen=True)
class Config:
    url: str
    token: str | None


def _read_file(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; run `pkb login` again") from None
    return data if isinstance(data, dict) else {}


def load(*, url: str | None = None) -> Config:
    """The site and token to use: --url, then PKB_URL / PKB_TOKEN, then the config file."""
    stored = _read_file(config_path())
    return Config(
        url=normalise_url(url or os.environ.get("PKB_URL") or stored.get("url") or DEFAULT_URL),
        token=os.environ.get("PKB_TOKEN") or stored.get("token") or None,
    )


def normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{url!r} is not a site address: expected http(s)://host[:port]")
    return url


def save(*, url: str, token: str) -> Path:
    """Write the config with mode 0600 (its folder 0700): the token is a password."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Created with 0600 from the start (never world-readable, not even for an instant), and
    # chmod-ed in case the file existed with looser bits.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"url": url, "token": token}, fh, indent=2)
        fh.write("\n")
    os.chmod(path, 0o600)
    return path
