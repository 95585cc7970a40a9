"""Diagnostics that measure the host and the harness (`bench`, `floor`, `calibrate`,
`pinning`, `probe`, `references`, `turnaround`: where one evaluation's seconds go).

Tools, not the judge: nothing here decides a score, except that the judges run
`probe.measure_peer_bandwidth` once per host for the roofline.
"""
