"""Help texts more than one area's serializers share."""

from __future__ import annotations

# Times are plain numbers in microseconds here, the unit in each field's name; the site
# and pkb show them scaled, unit always written (portal/formats.py).
TIME_HELP = "Median per-call time, in microseconds (µs), summed over the cases."
REF_TIME_HELP = "The reference's, in microseconds (µs), timed beside it."
TIMES = {"time_us": {"help_text": TIME_HELP}, "ref_time_us": {"help_text": REF_TIME_HELP}}

INTERVAL_HELP = (
    "Confidence interval of the speedup (low, high), from reference and candidate timed in "
    "alternating rounds; null for results of hosts that did not report one."
)
