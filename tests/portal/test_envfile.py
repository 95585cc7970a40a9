"""portal/envfile.py: the development `.env` that manage.py reads (and honcho, for `make run`)."""

from __future__ import annotations

import pytest
from honcho.environ import parse as honcho_parse

from portal.envfile import EnvFileError, load, parse

DEV_ENV = """\
# The embedded development setup
PKB_DEBUG=1

   # an indented comment
PKB_SECRET_KEY=-Ci0k_HZ-RPk=dug
REDIS_URL="redis://127.0.0.1:6379/3"
PKB_LOG_LEVEL='DEBUG'
PKB_EMPTY=""
PKB_BARE_EMPTY=
"""


def test_it_reads_names_and_values_and_skips_comments_and_blank_lines():
    assert parse(DEV_ENV) == {
        "PKB_DEBUG": "1",
        "PKB_SECRET_KEY": "-Ci0k_HZ-RPk=dug",
        "REDIS_URL": "redis://127.0.0.1:6379/3",
        "PKB_LOG_LEVEL": "DEBUG",
        "PKB_EMPTY": "",
        "PKB_BARE_EMPTY": "",
    }


def test_what_it_accepts_honcho_reads_the_same_way():
    """`make run`'s processes get the file from honcho: one file, one meaning."""
    ours = parse(DEV_ENV)
    ours.pop("PKB_BARE_EMPTY")  # honcho skips it; settings read "" as unset anyway
    assert honcho_parse(DEV_ENV) == ours


@pytest.mark.parametrize(
    "line",
    [
        "PKB_DEBUG",  # no value
        "export PKB_DEBUG=1",  # a shell script's line
        "PKB DEBUG=1",
        "1PKB=1",
        "PKB_SECRET_KEY=two words",  # honcho would join them into one
        "PKB_SECRET_KEY=abc # comment",  # honcho would drop the comment
        'PKB_SECRET_KEY="unclosed',
        "PKB_SECRET_KEY=a\\nb",
        "PKB_SECRET_KEY=it's",
    ],
)
def test_a_malformed_line_is_refused_with_its_number(line):
    with pytest.raises(EnvFileError, match=r"\.env, line 3: expected NAME=value") as err:
        parse(f"# settings\nPKB_DEBUG=1\n{line}\n")
    assert repr(line) in str(err.value)


def test_load_adds_only_what_the_environment_does_not_set(tmp_path):
    path = tmp_path / ".env"
    path.write_text(DEV_ENV)
    environ = {"PKB_DEBUG": "false", "PATH": "/usr/bin"}
    added = load(path, environ)
    assert environ["PKB_DEBUG"] == "false", "the environment wins"
    assert added["PKB_SECRET_KEY"] == environ["PKB_SECRET_KEY"] == "-Ci0k_HZ-RPk=dug"
    assert "PKB_DEBUG" not in added and environ["PATH"] == "/usr/bin"


def test_a_secret_given_as_a_file_in_the_environment_is_not_doubled(tmp_path):
    """Settings refuse NAME and NAME_FILE together; the environment's form wins."""
    path = tmp_path / ".env"
    path.write_text("PKB_SECRET_KEY=from-dotenv\nPKB_METRICS_TOKEN_FILE=/dotenv/token\n")
    environ = {"PKB_SECRET_KEY_FILE": "/etc/pkb/secret_key", "PKB_METRICS_TOKEN": "t"}
    assert load(path, environ) == {}
    assert environ == {"PKB_SECRET_KEY_FILE": "/etc/pkb/secret_key", "PKB_METRICS_TOKEN": "t"}


def test_load_without_a_file_does_nothing(tmp_path):
    environ: dict[str, str] = {}
    assert load(tmp_path / ".env", environ) == {} and environ == {}


def test_load_does_nothing_under_pytest(tmp_path):
    """The suite's settings never depend on a developer's `.env`."""
    path = tmp_path / ".env"
    path.write_text("PKB_DEBUG=1\n")
    environ = {"PYTEST_VERSION": "9.0.0"}
    assert load(path, environ) == {} and environ == {"PYTEST_VERSION": "9.0.0"}


def test_load_refuses_a_malformed_file_and_changes_nothing(tmp_path):
    path = tmp_path / ".env"
    path.write_text("PKB_DEBUG=1\nnot a line\n")
    environ: dict[str, str] = {}
    with pytest.raises(EnvFileError, match=f"{path}, line 2"):
        load(path, environ)
    assert environ == {}
