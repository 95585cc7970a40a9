"""SQL of the triggers that bump the boards' data version (see `freshness`).

Installed by migration 0001 of this app; later migrations install them again where they
changed (every statement is idempotent). On SQLite, a later migration that rebuilds a
watched table (SQLite's way to alter most columns) drops that table's triggers with it, so
`reinstall_sqlite_triggers` puts them back after every `migrate` (`apps.ready`).
"""

from __future__ import annotations

from typing import Any

# Columns of a submission that move while it runs and that no board reads: updating only
# these must not throw the boards away every few seconds.
LIVE_COLUMNS = (
    "heartbeat_at",
    "progress_done",
    "progress_total",
    "current_problem",
    "progress_phase",
    "host",
    "started_at",
    "queued_at",
)
WATCHED_MODELS = (("submissions", "ProblemResult"), ("problems", "Problem"), ("accounts", "Team"))
FUNCTION = "leaderboard_board_changed"
SEQUENCE = "leaderboard_board_version"  # PostgreSQL
# PostgreSQL: NOTIFY on this channel is delivered when the writing transaction commits,
# which is when the boards' watchers rebuild (freshness.py); repeats in one transaction
# are delivered once.
CHANNEL = "leaderboard_board_changed"
TABLE = "leaderboard_board_version"  # SQLite


def tables(apps: Any) -> tuple[list[str], str]:
    """The watched tables, and the submissions' table (watched with its live columns aside)."""
    watched = [apps.get_model(app, name)._meta.db_table for app, name in WATCHED_MODELS]
    return watched, apps.get_model("submissions", "Submission")._meta.db_table


def postgresql(watched: list[str], submissions: str) -> list[str]:
    live = ", ".join(f"'{c}'" for c in LIVE_COLUMNS)
    sql = [
        f"CREATE SEQUENCE IF NOT EXISTS {SEQUENCE}",
        f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM nextval('{SEQUENCE}');
              PERFORM pg_notify('{CHANNEL}', '');
              RETURN NULL;
            END $$""",
    ]
    sql += [
        f"CREATE OR REPLACE TRIGGER {FUNCTION} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE"
        f" ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()"
        for table in watched
    ]
    # A new submission changes no board (it has no results yet); its updates do, except
    # the live columns'. Comparing whole rows also covers columns added later.
    differs = f"(to_jsonb(OLD) - ARRAY[{live}]) IS DISTINCT FROM (to_jsonb(NEW) - ARRAY[{live}])"
    sql += [
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_update AFTER UPDATE ON {submissions}"
        f" FOR EACH ROW WHEN ({differs}) EXECUTE FUNCTION {FUNCTION}()",
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_delete AFTER DELETE OR TRUNCATE ON {submissions}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()",
    ]
    return sql


def sqlite_triggers(watched: list[str], submissions: str) -> list[str]:
    bump = f"UPDATE {TABLE} SET counter = counter + 1, token = random() WHERE id = 1"
    # SQLite cannot compare whole rows: every update of a submission counts (the embedded
    # setup has one evaluator; its heartbeats cost a rebuild of small boards).
    events = [(t, op) for t in watched for op in ("INSERT", "UPDATE", "DELETE")]
    events += [(submissions, "UPDATE"), (submissions, "DELETE")]
    return [
        f"CREATE TRIGGER IF NOT EXISTS {FUNCTION}_{table}_{op.lower()} AFTER {op} ON {table}"
        f" BEGIN {bump}; END"
        for table, op in events
    ]


def sqlite(watched: list[str], submissions: str) -> list[str]:
    # A random token with the counter: a rolled-back change (every test) leaves no version
    # that another state of the data could later repeat.
    return [
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1),"
        " counter INTEGER NOT NULL, token INTEGER NOT NULL)",
        f"INSERT OR IGNORE INTO {TABLE} (id, counter, token) VALUES (1, 0, random())",
        *sqlite_triggers(watched, submissions),
    ]


def install(apps: Any, schema_editor: Any) -> None:
    statements = {"postgresql": postgresql, "sqlite": sqlite}.get(schema_editor.connection.vendor)
    for statement in statements(*tables(apps)) if statements else []:
        schema_editor.execute(statement)


def uninstall(apps: Any, schema_editor: Any) -> None:
    watched, submissions = tables(apps)
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}() CASCADE")
        schema_editor.execute(f"DROP SEQUENCE IF EXISTS {SEQUENCE}")
    elif vendor == "sqlite":
        for table in [*watched, submissions]:
            for op in ("insert", "update", "delete"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {FUNCTION}_{table}_{op}")
        schema_editor.execute(f"DROP TABLE IF EXISTS {TABLE}")


def reinstall_sqlite_triggers(*, using: str = "default", apps: Any = None, **_: Any) -> None:
    """post_migrate: put back triggers that a rebuilt SQLite table lost. Idempotent."""
    from django.apps import apps as global_apps
    from django.db import connections

    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [TABLE])
        if cursor.fetchone() is None:
            return  # this app's migration has not run (yet)
        for statement in sqlite_triggers(*tables(apps or global_apps)):
            cursor.execute(statement)
