from __future__ import annotations

import json
import pwd
from pathlib import Path

import pytest

from evaluator.host.settings import SettingsError, _candidate_user, env_bool, load_settings
from evaluator.judge.seeds import checked_calls, trial_seed

SECRET = b"s" * 32


def test_trial_seeds_are_63_bit_and_depend_on_every_part():
    seeds = {
        trial_seed(SECRET, "e1", "all-reduce", "dev-tiny", 0),
        trial_seed(SECRET, "e1", "all-reduce", "dev-tiny", 1),
        trial_seed(SECRET, "e2", "all-reduce", "dev-tiny", 0),
        trial_seed(b"t" * 32, "e1", "all-reduce", "dev-tiny", 0),
        trial_seed(SECRET, "e1a", "ll-reduce", "dev-tiny", 0),
    }
    assert len(seeds) == 5
    assert all(0 <= s < 2**63 for s in seeds)
    assert trial_seed(SECRET, "x", 1) == trial_seed(SECRET, "x", 1)


def test_settings_default_to_the_embedded_setup():
    settings = load_settings({})
    assert settings.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.profile == "cpu"
    assert (settings.problem_timeout_s, settings.trials) == (120.0, 3)
    assert (settings.warmup, settings.iters) == (3, 20)
    assert settings.eval_cases is None
    # Six pairs: the least whose median interval reaches 95%; CPU hosts take no more.
    assert (settings.rounds, settings.most_rounds) == (6, 6)


def test_gpu_profiles_time_more_rounds_of_more_calls(caplog):
    settings = load_settings({"PKB_PROFILE": "h200x4"})
    assert (settings.rounds, settings.warmup, settings.iters) == (10, 10, 500)
    assert (settings.most_rounds, settings.target_halfwidth) == (200, 0.03)
    assert settings.run_spread == 0.02  # what more pairs cannot shrink (judge/stats.py)
    assert load_settings({"PKB_PROFILE": "h200x4", "PKB_RUN_SPREAD": "0"}).run_spread == 0
    assert load_settings({"PKB_PROFILE": "cpu"}).run_spread == 0
    with pytest.raises(SettingsError, match="PKB_RUN_SPREAD"):
        load_settings({"PKB_RUN_SPREAD": "-0.01"})
    settings = load_settings({"PKB_ROUNDS": "4", "PKB_CLOCK_MARGIN_S": "0.02"})
    assert settings.rounds == settings.most_rounds == 4
    # The margin of the former clock is gone: a host that still sets it is told so.
    assert "PKB_CLOCK_MARGIN_S is no longer used" in caplog.text


def test_without_a_secret_each_load_draws_a_random_one():
    first, second = load_settings({}), load_settings({})
    assert first.seed_secret_generated and first.seed_secret != second.seed_secret
    assert repr(first.seed_secret) not in repr(first)


def test_the_secret_can_come_from_a_file(tmp_path):
    path = tmp_path / "secret"
    path.write_bytes(b"0123456789abcdef0123\n")
    settings = load_settings({"PKB_SEED_SECRET_FILE": str(path)})
    assert settings.seed_secret == b"0123456789abcdef0123"
    assert not settings.seed_secret_generated


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"PKB_TRIALS": "three"}, "PKB_TRIALS must be an integer"),
        ({"PKB_TRIALS": "0"}, "PKB_TRIALS must be at least 1"),
        ({"PKB_PROBLEM_TIMEOUT_S": "nan"}, "PKB_PROBLEM_TIMEOUT_S must be at least"),
        ({"PKB_ROUNDS": "0"}, "PKB_ROUNDS must be at least 1"),
        ({"PKB_PROFILE": "tpu"}, "unknown hardware profile 'tpu'"),
        ({"PKB_SEED_SECRET": "short"}, "at least 16 bytes"),
        ({"PKB_SEED_SECRET": "x" * 20, "PKB_SEED_SECRET_FILE": "/x"}, "not both"),
        ({"PKB_KEEP_SCRATCH": "maybe"}, "PKB_KEEP_SCRATCH must be true or false"),
        ({"PKB_EVAL_CASES_FILE": "/nonexistent/cases.json"}, "cannot read"),
        ({"PKB_SANDBOX": "docker"}, "PKB_SANDBOX must be one of bubblewrap, namespaces"),
        ({"PKB_EVALUATION_MEMORY_MB": "-1"}, "PKB_EVALUATION_MEMORY_MB must be at least 0"),
    ],
)
def test_bad_values_fail_loudly(env, match):
    with pytest.raises(SettingsError, match=match):
        load_settings(env)


def test_the_sandbox_and_the_memory_cap_default_to_bubblewrap_and_three_quarters():
    settings = load_settings({})
    assert settings.sandbox == "bubblewrap"
    total = int(Path("/proc/meminfo").read_text().split()[1]) // 1024  # MemTotal, kB
    assert settings.evaluation_memory_bytes == int(total * 0.75) << 20
    chosen = load_settings({"PKB_SANDBOX": "Namespaces", "PKB_EVALUATION_MEMORY_MB": "0"})
    assert (chosen.sandbox, chosen.evaluation_memory_bytes) == ("namespaces", 0)


def test_env_bool_accepts_only_clear_values():
    assert env_bool({"X": "True"}, "X", False) is True
    assert env_bool({"X": "0"}, "X", True) is False
    assert env_bool({}, "X", True) is True


def test_eval_cases_file_replaces_the_demo_cases(tmp_path):
    path = tmp_path / "cases.json"
    cases = [{"name": "hidden-1", "dtype": "bfloat16", "params": {"n": 4096}}]
    path.write_text(json.dumps({"all-reduce": cases}))
    settings = load_settings({"PKB_EVAL_CASES_FILE": str(path)})
    assert [c.name for c in settings.eval_cases["all-reduce"]] == ["hidden-1"]

    path.write_text(json.dumps({"all-reduce": [dict(cases[0], dtype="float8")]}))
    with pytest.raises(SettingsError, match="unknown dtype 'float8'"):
        load_settings({"PKB_EVAL_CASES_FILE": str(path)})


def test_bundle_code_runs_as_nobody_by_default_when_the_worker_is_root():
    identity = _candidate_user({}, euid=0)
    assert identity is not None and identity.name == "nobody"
    assert identity.uid == pwd.getpwnam("nobody").pw_uid and identity.uid != 0


def test_a_candidate_user_can_be_named():
    identity = _candidate_user({"PKB_CANDIDATE_USER": "daemon"}, euid=0)
    assert identity is not None and identity.uid == pwd.getpwnam("daemon").pw_uid


def test_an_unknown_or_root_candidate_user_stops_the_worker():
    with pytest.raises(SettingsError, match="no user 'no-such-user'"):
        _candidate_user({"PKB_CANDIDATE_USER": "no-such-user"}, euid=0)
    with pytest.raises(SettingsError, match="is root"):
        _candidate_user({"PKB_CANDIDATE_USER": "root"}, euid=0)


def test_the_candidate_user_is_ignored_when_the_worker_is_not_root(caplog):
    with caplog.at_level("INFO"):
        assert _candidate_user({"PKB_CANDIDATE_USER": "nobody"}, euid=1000) is None
    assert "ignored: the worker is not root" in caplog.text


def test_the_pairs_adapt_between_bounds_the_host_sets():
    gpu = {"PKB_PROFILE": "h200x2"}
    settings = load_settings({**gpu, "PKB_ROUNDS": "250"})
    assert settings.rounds == settings.most_rounds == 250  # a cap never undoes more pairs
    settings = load_settings({**gpu, "PKB_MAX_ROUNDS": "12", "PKB_TARGET_HALFWIDTH": "0.05"})
    assert (settings.rounds, settings.most_rounds, settings.target_halfwidth) == (10, 12, 0.05)
    with pytest.raises(SettingsError, match="PKB_MAX_ROUNDS .8. must be at least PKB_ROUNDS"):
        load_settings({**gpu, "PKB_MAX_ROUNDS": "8"})
    with pytest.raises(SettingsError, match="PKB_TARGET_HALFWIDTH must be a number"):
        load_settings({"PKB_TARGET_HALFWIDTH": "tight"})


def test_the_checked_calls_hold_the_last_least_pairs_last_call_and_the_rest_drawn():
    plan = checked_calls(rounds=3, calls=4, timed_checks=5)
    drawn = [(k, i) for k, calls in plan.items() for i in calls]
    assert (2, 3) in drawn and len(drawn) == len(set(drawn)) == 5
    assert all(0 <= k < 3 and 0 <= i < 4 for k, i in drawn)
    # Never more than the least pairs hold.
    assert sum(map(len, checked_calls(rounds=1, calls=2, timed_checks=10).values())) == 2
