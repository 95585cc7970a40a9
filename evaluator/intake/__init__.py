"""Bundle intake: read and check an upload (`archive`, `bundle`, `sources`) before anything
runs, and the compile pass (`compile`), which imports each solution once in a sandboxed
process of its own, forked by the bundle's import server (`import_server`, which never
imports bundle code; bundle code runs in its children; the parent reads their JSON replies
and logs only)."""
