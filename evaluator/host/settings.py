"""Evaluator settings, read from the environment once and failing loudly on bad values.

Defaults give the embedded setup: a local Redis and the CPU profile. No secret has a
committed default: without PKB_SEED_SECRET(_FILE) each process draws a random one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.host.cgroups import EVALUATION_MEMORY_SHARE, host_memory_mb
from evaluator.host.hostplan import visible_devices
from evaluator.host.profiles import DEFAULT_PROFILE, HardwareProfile, get_profile
from evaluator.host.rlimits import Limits
from evaluator.host.sandbox import Identity
from problems.spec import DTYPES, Case

log = logging.getLogger(__name__)

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
MIN_SECRET_BYTES = 16
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# (warmup, iters): gloo on CPU is slow and noisy anyway; GPUs get more samples.
# On GPUs up to 50 timed calls a round (the judges take fewer for long or large calls):
# a round's fixed cost, spread over them, then leaves the floor within 5 us of
# back-to-back calls (docs/measurements/2026-11-25-trusted-judging-h100.md).
_TIMING_DEFAULTS = {"gloo": (3, 20), "nccl": (10, 500)}
# Pairs of rounds per case (iters split among the first `rounds`): (at least, at most).
# At least 6: under 8 crossover blocks (16 pairs) the interval is the range of the pairs,
# whose coverage reaches 95% at 6 (stats.py); GPU hosts add pairs while the pairs' own 95%
# interval is wider than PKB_TARGET_HALFWIDTH of the median. A launch-bound pair of the
# same code reads within about 5% (median absolute deviation) on one H100, so 3% takes
# 20-200 pairs (a median of 74 from at least 20); a pair costs 15-30 ms there, a
# calibration of three cases 20-30 s (docs/measurements/2026-11-26-pairs-to-settle.md).
# At the former cap of 40, same code read within 2% in 21 of 36 cases; at 200, in 26.
# CPU hosts (2 cores, gloo) never come near 3%: a fixed 6 keeps their wall time.
_ROUND_DEFAULTS: dict[str, tuple[int, int | None]] = {"gloo": (6, None), "nccl": (10, 200)}
# How far the same code's median reads from one run to the next (judge/stats.py,
# `with_run_spread`): on GPUs the spread of twelve same-code runs' medians on 2026-11-26,
# 1.5-2.6% by case (docs/measurements/2026-11-26-pairs-to-settle.md). CPU hosts' intervals,
# the range of six pairs, are already wider than any spread between runs.
_RUN_SPREAD_DEFAULTS = {"gloo": 0.0, "nccl": 0.02}


class SettingsError(ValueError):
    """An environment variable holds a value the evaluator cannot use."""


@dataclass(frozen=True)
class Settings:
    redis_url: str
    profile: str
    seed_secret: bytes = field(repr=False)
    seed_secret_generated: bool
    eval_cases: Mapping[str, tuple[Case, ...]] | None
    problem_timeout_s: float
    trials: int
    warmup: int
    iters: int
    rotation: int
    scratch_dir: Path
    keep_scratch: bool = False
    # Outputs of timed calls the judge checks, the last included. A solution that replays
    # stale outputs on a share f of the calls escapes with probability (1 - f)^timed_checks.
    timed_checks: int = 10
    rounds: int = 1  # pairs of reference and candidate rounds per case, at least
    # At most (problem_run adds pairs until the interval settles); None: exactly `rounds`.
    max_rounds: int | None = None
    target_halfwidth: float = 0.03  # of the median speedup: the interval is settled within it
    run_spread: float = 0.0  # a run median's relative spread, added to reported intervals

    @property
    def most_rounds(self) -> int:
        return max(self.rounds, self.max_rounds or self.rounds)

    limits: Limits = field(default_factory=Limits)  # of every process running bundle code
    isolate_network: bool = True  # a network namespace for bundle code, where allowed
    # "bubblewrap": the sandbox of evaluator/host/bubblewrap.py (files, sockets, processes,
    # system calls); "namespaces": the network jail alone (sandbox.NetworkJail), for a
    # host where bubblewrap cannot run.
    sandbox: str = "bubblewrap"
    # The memory every process of one evaluation's bundle code may hold together (a cgroup,
    # evaluator/host/cgroups.py); 0: no cap. By default three quarters of the host's memory;
    # hostplan gives each worker its GPUs' share of that.
    evaluation_memory_bytes: int = 0
    # Host folders bound read-write into the bubblewrap sandbox (PKB_SANDBOX_SHARED, ":"
    # between them): for tests whose bundle code writes notes for the test to read. Never
    # on a production host: whatever is there, every bundle may read and change.
    sandbox_shared: tuple[Path, ...] = ()
    # Size of each private tmpfs bundle code may write in the bubblewrap sandbox (/tmp,
    # /var/tmp, /dev/shm, its HOME, TMPDIR and build caches): a disk it cannot fill.
    sandbox_tmp_bytes: int = 1 << 30
    # Who bundle code runs as: None when the worker is not root (it is unprivileged then).
    candidate_user: Identity | None = None
    # This worker's Celery node name is pkb-<worker_name>@<host>: several workers on one
    # host (docs/deploy.md) each need their own, or Celery mixes up their replies.
    worker_name: str = ""


def env_str(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip()
    return value or default


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, *, minimum: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if not value >= minimum:  # also catches nan
        raise SettingsError(f"{name} must be at least {minimum}, got {raw}")
    return value


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false (or 1/0, yes/no, on/off), got {raw!r}")


def default_run_spread(backend: str) -> float:
    """The run-level spread a host of this backend adds to its intervals by default; the
    rule stored results are read again by (portal/submissions/services/rescore.py)."""
    return _RUN_SPREAD_DEFAULTS.get(backend, _RUN_SPREAD_DEFAULTS["nccl"])


def redis_url(env: Mapping[str, str] = os.environ) -> str:
    return env_str(env, "REDIS_URL", DEFAULT_REDIS_URL)


def load_settings(env: Mapping[str, str] = os.environ) -> Settings:
    profile_name = env_str(env, "PKB_PROFILE", DEFAULT_PROFILE)
    try:
        profile = get_profile(profile_name)
    except KeyError as exc:
        raise SettingsError(f"PKB_PROFILE: {exc.args[0]}") from None
    _check_pinned_devices(env, profile)
    warmup, iters = _TIMING_DEFAULTS.get(profile.backend, _TIMING_DEFAULTS["nccl"])
    rounds, max_rounds = _ROUND_DEFAULTS.get(profile.backend, _ROUND_DEFAULTS["nccl"])
    for gone in ("PKB_CLOCK_MARGIN_S", "PKB_CLOCK_MARGIN_REL"):
        if gone in env:
            log.warning("%s is no longer used: the judge's own clock needs no margin", gone)
    secret, generated = _seed_secret(env)
    return Settings(
        redis_url=redis_url(env),
        profile=profile.name,
        seed_secret=secret,
        seed_secret_generated=generated,
        eval_cases=_eval_cases(env),
        problem_timeout_s=env_float(env, "PKB_PROBLEM_TIMEOUT_S", 120.0, minimum=1.0),
        trials=env_int(env, "PKB_TRIALS", 3, minimum=1),
        warmup=env_int(env, "PKB_WARMUP", warmup, minimum=0),
        iters=env_int(env, "PKB_ITERS", iters, minimum=1),
        rotation=env_int(env, "PKB_ROTATION", 3, minimum=1),
        scratch_dir=Path(env_str(env, "PKB_SCRATCH_DIR", tempfile.gettempdir())),
        keep_scratch=env_bool(env, "PKB_KEEP_SCRATCH", False),
        timed_checks=env_int(env, "PKB_TIMED_CHECKS", 10, minimum=1),
        rounds=(least := env_int(env, "PKB_ROUNDS", rounds, minimum=1)),
        max_rounds=_max_rounds(env, least, max_rounds),
        target_halfwidth=env_float(env, "PKB_TARGET_HALFWIDTH", 0.03, minimum=0.0),
        run_spread=env_float(
            env, "PKB_RUN_SPREAD", default_run_spread(profile.backend), minimum=0.0
        ),
        limits=_limits(env),
        isolate_network=env_bool(env, "PKB_ISOLATE_NETWORK", True),
        sandbox=_sandbox(env),
        sandbox_shared=tuple(
            Path(p) for p in env.get("PKB_SANDBOX_SHARED", "").split(os.pathsep) if p.strip()
        ),
        sandbox_tmp_bytes=env_int(env, "PKB_SANDBOX_TMP_MB", 1024, minimum=16) << 20,
        evaluation_memory_bytes=env_int(
            env, "PKB_EVALUATION_MEMORY_MB", default_evaluation_memory_mb(), minimum=0
        )
        * 1024
        * 1024,
        candidate_user=_candidate_user(env),
        worker_name=_worker_name(env, default=profile.name),
    )


SANDBOXES = ("bubblewrap", "namespaces")


def default_evaluation_memory_mb() -> int:
    return int(host_memory_mb() * EVALUATION_MEMORY_SHARE)


def _sandbox(env: Mapping[str, str]) -> str:
    value = env_str(env, "PKB_SANDBOX", SANDBOXES[0]).lower()
    if value not in SANDBOXES:
        raise SettingsError(f"PKB_SANDBOX must be one of {', '.join(SANDBOXES)}, got {value!r}")
    return value


def _max_rounds(env: Mapping[str, str], least: int, default: int | None) -> int | None:
    """PKB_MAX_ROUNDS, never below PKB_ROUNDS (a PKB_ROUNDS above the default cap raises
    the cap with it: asking for more pairs must not be undone by a default)."""
    if not env.get("PKB_MAX_ROUNDS", "").strip():
        return None if default is None else max(default, least)
    most = env_int(env, "PKB_MAX_ROUNDS", least, minimum=1)
    if most < least:
        raise SettingsError(f"PKB_MAX_ROUNDS ({most}) must be at least PKB_ROUNDS ({least})")
    return most


def _check_pinned_devices(env: Mapping[str, str], profile: HardwareProfile) -> None:
    """A GPU worker pinned with CUDA_VISIBLE_DEVICES to fewer GPUs than its profile's ranks
    could never start them: say so at start-up, not at the first evaluation."""
    devices = visible_devices(env)
    if profile.backend != "nccl" or devices is None:
        return
    if len(devices) < profile.world_size:
        raise SettingsError(
            f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} pins {len(devices)} GPUs; "
            f"profile {profile.name} needs {profile.world_size}"
        )


_WORKER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def _worker_name(env: Mapping[str, str], *, default: str) -> str:
    name = env_str(env, "PKB_WORKER_NAME", default)
    if not _WORKER_NAME.fullmatch(name):
        raise SettingsError(
            f"PKB_WORKER_NAME must be letters, digits, '.', '_' or '-' (at most 63), got {name!r}"
        )
    return name


def _candidate_user(env: Mapping[str, str], *, euid: int | None = None) -> Identity | None:
    """PKB_CANDIDATE_USER (default nobody) when the worker is root; else None."""
    euid = os.geteuid() if euid is None else euid
    name = env_str(env, "PKB_CANDIDATE_USER", "nobody")
    if euid != 0:
        if env.get("PKB_CANDIDATE_USER", "").strip():
            log.info(
                "PKB_CANDIDATE_USER=%s ignored: the worker is not root (uid %d), so bundle "
                "code runs as the worker's own unprivileged user",
                name,
                euid,
            )
        return None
    try:
        identity = Identity.of(name)
    except KeyError:
        raise SettingsError(f"PKB_CANDIDATE_USER: no user {name!r} on this host") from None
    if identity.uid == 0 or identity.gid == 0:
        raise SettingsError(f"PKB_CANDIDATE_USER: {name!r} is root (uid or gid 0)")
    return identity


def _limits(env: Mapping[str, str]) -> Limits:
    mib = 1024 * 1024
    return Limits(
        cpu_s=env_int(env, "PKB_CANDIDATE_CPU_S", 7200, minimum=0),
        memory_bytes=env_int(env, "PKB_CANDIDATE_MEMORY_MB", 32768, minimum=0) * mib,
        open_files=env_int(env, "PKB_CANDIDATE_OPEN_FILES", 4096, minimum=0),
        tasks=env_int(env, "PKB_CANDIDATE_TASKS", 1024, minimum=0),
        file_bytes=env_int(env, "PKB_CANDIDATE_FILE_MB", 256, minimum=0) * mib,
    )


def _seed_secret(env: Mapping[str, str]) -> tuple[bytes, bool]:
    value = env.get("PKB_SEED_SECRET", "")
    path = env.get("PKB_SEED_SECRET_FILE", "").strip()
    if value and path:
        raise SettingsError("set PKB_SEED_SECRET or PKB_SEED_SECRET_FILE, not both")
    if path:
        try:
            secret = Path(path).read_bytes().strip()
        except OSError as exc:
            raise SettingsError(f"PKB_SEED_SECRET_FILE: cannot read {path}: {exc}") from None
        source = f"PKB_SEED_SECRET_FILE ({path})"
    elif value:
        secret = value.encode("utf-8")
        source = "PKB_SEED_SECRET"
    else:
        # Fresh per process: fine for a dev host, and never predictable from the repository.
        log.warning("no PKB_SEED_SECRET or PKB_SEED_SECRET_FILE; generated a random seed secret")
        return secrets.token_bytes(32), True
    if len(secret) < MIN_SECRET_BYTES:
        raise SettingsError(f"{source} must hold at least {MIN_SECRET_BYTES} bytes")
    return secret, False


def _eval_cases(env: Mapping[str, str]) -> dict[str, tuple[Case, ...]] | None:
    path = env.get("PKB_EVAL_CASES_FILE", "").strip()
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SettingsError(f"PKB_EVAL_CASES_FILE: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"PKB_EVAL_CASES_FILE: {path} must hold a JSON object")
    return {str(slug): _cases_of(path, slug, items) for slug, items in data.items()}


def _cases_of(path: str, slug: str, items: object) -> tuple[Case, ...]:
    if not isinstance(items, list) or not items:
        raise SettingsError(f"PKB_EVAL_CASES_FILE: {path}: {slug!r} must be a non-empty list")
    cases = []
    for i, item in enumerate(items):
        where = f"PKB_EVAL_CASES_FILE: {path}: {slug!r} case {i}"
        try:
            case = Case.from_json(item)
        except (KeyError, TypeError, ValueError) as exc:
            raise SettingsError(f"{where}: bad case: {exc!r}") from None
        if case.dtype not in DTYPES:
            raise SettingsError(f"{where}: unknown dtype {case.dtype!r}")
        if not all(isinstance(v, int) for v in case.params.values()):
            raise SettingsError(f"{where}: params must be integers")
        cases.append(case)
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise SettingsError(f"PKB_EVAL_CASES_FILE: {path}: {slug!r} repeats a case name")
    return tuple(cases)
