"""The `pkb` commands, one module per kind of work; `portal.cli.main` parses the arguments
and hands each command its `cmd_*` function here."""
