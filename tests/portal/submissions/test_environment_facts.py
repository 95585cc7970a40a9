from __future__ import annotations

import re
from pathlib import Path

from portal.submissions.selectors import _FACT_LABELS, Fact, environment_facts

REPO = Path(__file__).resolve().parents[3]


def test_the_fingerprint_comes_in_the_order_hosts_are_compared():
    facts = environment_facts(
        {
            "hostname": "h",
            "cuda": "13.0",
            "gpu": "NVIDIA H200",
            "gpu_count": 8,
            "driver": "580",
            "torch": "2.11",
            "nccl": "2.27",
        }
    )
    assert [f.label for f in facts] == ["GPUs", "Driver", "CUDA", "PyTorch", "NCCL", "Host"]


def test_unknown_keys_read_as_words_and_empty_ones_are_dropped():
    facts = environment_facts({"python": "3.12", "mig_mode": {"enabled": False}, "cuda": None})
    assert facts == [Fact("Python", "3.12"), Fact("Mig mode", '{"enabled": false}')]


def test_every_key_a_host_sends_has_a_label():
    # What the evaluating process adds to the host's own facts (judge/evaluate.py).
    facts = environment_facts(
        {"memory_cap_mb": 16384, "candidate_user": "pkb-candidate", "compile_s": 1.25}
    )
    assert facts == [
        Fact("Compile pass", "1.2 s (every solution imported once, in parallel, before timing)"),
        Fact("Bundle code's user", "pkb-candidate"),
        Fact("Memory cap", "16384 MiB for the whole evaluation (a memory cgroup)"),
    ]


def test_a_bare_bandwidth_number_reads_as_gbps():
    assert environment_facts({"peer_bandwidth_gbps": 388.14}) == [
        Fact("Measured peer bandwidth", "388.1 GB/s")
    ]


def test_a_malformed_environment_shows_nothing():
    assert environment_facts(["not", "a", "dict"]) == []
    assert environment_facts({}) == []


def test_the_compile_pass_time_reads_as_seconds():
    assert environment_facts({"compile_s": 69.314}) == [
        Fact("Compile pass", "69.3 s (every solution imported once, in parallel, before timing)")
    ]


def test_it_says_whether_bundle_code_had_a_network():
    label = "Bundle code's network"
    assert environment_facts({"network_isolated": True}) == [
        Fact(label, "none (a network namespace of its own)")
    ]
    assert environment_facts({"network_isolated": False}) == [
        Fact(label, "the host's (not isolated)")
    ]


def test_it_says_how_the_candidate_stood_still_while_the_reference_was_timed():
    label = "Candidate while the reference is timed"
    assert environment_facts({"candidate_frozen": True}) == [
        Fact(label, "every process of its rank frozen (a cgroup of the rank's; no signal sent)")
    ]
    assert environment_facts({"candidate_frozen": False}) == [
        Fact(
            label,
            "not stopped: no freezer on this host (a development host; speedups not to be trusted)",
        )
    ]


def test_it_names_the_sandbox_that_ran_bundle_code_none_included():
    label = "Bundle code's sandbox"
    assert environment_facts({"sandbox": "bubblewrap"}) == [
        Fact(label, "bubblewrap (its own namespaces, read-only host files, a system-call filter)")
    ]
    assert environment_facts({"sandbox": None}) == [
        Fact(label, "none (a development host: bundle code ran as the worker's processes do)")
    ]


def test_every_key_the_evaluating_process_writes_has_a_label():
    """Read from judge/evaluate.py itself: a key added there without a label here read as
    "Pool starts s 16.495" on every page (issue 40, item 9)."""
    source = (REPO / "evaluator" / "judge" / "evaluate.py").read_text()
    written = set(re.findall(r'environment\["(\w+)"\]\s*=', source))
    assert {"compile_s", "memory_cap_mb"} <= written  # the pattern still finds them
    assert sorted(written - set(_FACT_LABELS)) == []


def test_the_evaluations_start_times_read_as_seconds():
    sandbox, pools = environment_facts({"sandbox_start_s": 0.461, "pool_starts_s": [16.495, 2.25]})
    assert sandbox.label == "Sandbox start" and sandbox.value.startswith("0.5 s (")
    assert pools.label == "Rank processes' start" and pools.value.startswith("16.5 s, 2.2 s (")
