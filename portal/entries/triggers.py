"""The boards' data version (portal/leaderboard/freshness.py) moves with the entries too.

A board shows each entry's name, kind and scores, which change with these tables; the
leaderboard app's migrations made the function (PostgreSQL) and the version table
(SQLite) that the triggers below call, so this app's migration only adds triggers.
"""

from __future__ import annotations

from typing import Any

from portal.leaderboard.triggers import FUNCTION, TABLE

WATCHED_MODELS = ("Entry", "EntrySample", "EntryAttempt")
OPERATIONS = ("INSERT", "UPDATE", "DELETE")


def _tables(apps: Any) -> list[str]:
    return [apps.get_model("entries", name)._meta.db_table for name in WATCHED_MODELS]


def postgresql(tables: list[str]) -> list[str]:
    return [
        f"CREATE OR REPLACE TRIGGER {FUNCTION} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE"
        f" ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()"
        for table in tables
    ]


def sqlite(tables: list[str]) -> list[str]:
    bump = f"UPDATE {TABLE} SET counter = counter + 1, token = random() WHERE id = 1"
    return [
        f"CREATE TRIGGER IF NOT EXISTS {FUNCTION}_{table}_{op.lower()} AFTER {op} ON {table}"
        f" BEGIN {bump}; END"
        for table in tables
        for op in OPERATIONS
    ]


def install(apps: Any, schema_editor: Any) -> None:
    statements = {"postgresql": postgresql, "sqlite": sqlite}.get(schema_editor.connection.vendor)
    for statement in statements(_tables(apps)) if statements else []:
        schema_editor.execute(statement)


def uninstall(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    for table in _tables(apps):
        if vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {FUNCTION} ON {table}")
        elif vendor == "sqlite":
            for op in OPERATIONS:
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {FUNCTION}_{table}_{op.lower()}")


def reinstall_sqlite_triggers(*, using: str = "default", apps: Any = None, **_: Any) -> None:
    """post_migrate: SQLite drops a table's triggers when a migration rebuilds the table."""
    from django.apps import apps as global_apps
    from django.db import connections

    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    apps = apps or global_apps
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [TABLE])
        if cursor.fetchone() is None:
            return
        try:
            tables = _tables(apps)
        except LookupError:
            return  # this app is not in the migrated state
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        present = {row[0] for row in cursor.fetchall()}
        for statement in sqlite([t for t in tables if t in present]):
            cursor.execute(statement)
