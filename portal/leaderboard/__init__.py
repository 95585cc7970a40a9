"""Rankings of teams, overall and per parallelism category."""
