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


# Marks for the kept rows (models.KeptRow, kept.py): which group a change touched. A result,
# a submission, a team: its group (a team, or an example's label); a problem: every group
# (a change of its version, status, weight or hardware moves many teams' sums; rare).
MARKS = "leaderboard_stalemark"


def _group(row: str) -> str:
    """The group of a submission `row`, as selectors/counted.py pools it: (team, label)."""
    return f"CASE WHEN {row}.example_label = '' THEN {row}.team_id END, {row}.example_label"


def _mark_submission(submissions: str, submission_id: str) -> str:
    insert = f"INSERT INTO {MARKS} (team_id, label)"
    return f"{insert} SELECT {_group('s')} FROM {submissions} s WHERE s.id = {submission_id}"


def _mark(values: str) -> str:
    return f"INSERT INTO {MARKS} (team_id, label) VALUES ({values})"


def _mark_tables(apps: Any) -> tuple[str, str, str, str]:
    results, problems, teams = (
        apps.get_model(app, name)._meta.db_table for app, name in WATCHED_MODELS
    )
    return results, problems, teams, apps.get_model("submissions", "Submission")._meta.db_table


def postgresql_marks(apps: Any) -> list[str]:
    results, problems, teams, submissions = _mark_tables(apps)
    functions = {
        "result": f"""IF TG_OP = 'DELETE' THEN {_mark_submission(submissions, "OLD.submission_id")};
              ELSE {_mark_submission(submissions, "NEW.submission_id")}; END IF;""",
        # An update may move a submission to another group (staff make it an example).
        "submission": f"""IF TG_OP <> 'INSERT' THEN {_mark(_group("OLD"))}; END IF;
              IF TG_OP = 'UPDATE' THEN {_mark(_group("NEW"))}; END IF;""",
        "team": _mark("OLD.id, ''") + ";",
        "problem": _mark("NULL, ''") + ";",
    }
    sql = [
        f"""CREATE OR REPLACE FUNCTION {FUNCTION}_mark_{name}() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
              {body}
              RETURN NULL;
            END $$"""
        for name, body in functions.items()
    ]
    live = ", ".join(f"'{c}'" for c in LIVE_COLUMNS)
    differs = f"(to_jsonb(OLD) - ARRAY[{live}]) IS DISTINCT FROM (to_jsonb(NEW) - ARRAY[{live}])"
    each_row = "FOR EACH ROW EXECUTE FUNCTION"
    sql += [
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_mark AFTER INSERT OR UPDATE OR DELETE ON {results}"
        f" {each_row} {FUNCTION}_mark_result()",
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_mark_update AFTER UPDATE ON {submissions}"
        f" FOR EACH ROW WHEN ({differs}) EXECUTE FUNCTION {FUNCTION}_mark_submission()",
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_mark_delete AFTER DELETE ON {submissions}"
        f" {each_row} {FUNCTION}_mark_submission()",
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_mark AFTER UPDATE OR DELETE ON {teams}"
        f" {each_row} {FUNCTION}_mark_team()",
        f"CREATE OR REPLACE TRIGGER {FUNCTION}_mark AFTER INSERT OR UPDATE OR DELETE"
        f" ON {problems} FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}_mark_problem()",
    ]
    return sql


def sqlite_marks(apps: Any) -> list[str]:
    results, problems, teams, submissions = _mark_tables(apps)
    bodies = [
        (results, "INSERT", _mark_submission(submissions, "NEW.submission_id")),
        (results, "UPDATE", _mark_submission(submissions, "NEW.submission_id")),
        (results, "DELETE", _mark_submission(submissions, "OLD.submission_id")),
        (submissions, "UPDATE", f"{_mark(_group('OLD'))}; {_mark(_group('NEW'))}"),
        (submissions, "DELETE", _mark(_group("OLD"))),
        (teams, "UPDATE", _mark("OLD.id, ''")),
        (teams, "DELETE", _mark("OLD.id, ''")),
        *((problems, op, _mark("NULL, ''")) for op in ("INSERT", "UPDATE", "DELETE")),
    ]
    return [
        f"CREATE TRIGGER IF NOT EXISTS {FUNCTION}_mark_{table}_{op.lower()} AFTER {op} ON {table}"
        f" BEGIN {body}; END"
        for table, op, body in bodies
    ]


def install_marks(apps: Any, schema_editor: Any) -> None:
    """Install the marks' triggers, and mark every group: rows kept from now on start full."""
    statements = {"postgresql": postgresql_marks, "sqlite": sqlite_marks}.get(
        schema_editor.connection.vendor
    )
    for statement in statements(apps) if statements else []:
        schema_editor.execute(statement)
    schema_editor.execute(_mark("NULL, ''"))


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
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [MARKS])
        if cursor.fetchone() is not None:
            for statement in sqlite_marks(apps or global_apps):
                cursor.execute(statement)


def uninstall_marks(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name in ("result", "submission", "team", "problem"):
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}_mark_{name}() CASCADE")
    elif vendor == "sqlite":
        for statement in sqlite_marks(apps):
            name = statement.split()[5]  # CREATE TRIGGER IF NOT EXISTS <name> ...
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
