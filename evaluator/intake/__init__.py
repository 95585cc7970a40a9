"""Bundle intake: read and check an upload (`archive`, `bundle`, `sources`) before anything
runs, and the compile pass (`compile`), which imports each solution once in a sandboxed
process of its own (bundle code runs there; the parent reads its JSON reply and its log
only)."""
