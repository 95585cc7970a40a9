"""What no runner can predict: trial seeds derived from a host secret, and which timed
calls the judges check.

Rank processes only ever see the derived seeds: the secret stays in the evaluator's parent
process, so neither a candidate nor anyone reading the public repository can predict the
inputs of an evaluation.
"""

from __future__ import annotations

import hashlib
import hmac
import random

_MASK_63 = (1 << 63) - 1


def trial_seed(secret: bytes, *parts: object) -> int:
    """A non-negative 63-bit seed, HMAC-SHA256(secret, parts).

    Each part is length-prefixed so that ("ab", "c") and ("a", "bc") never collide.
    """
    if not secret:
        raise ValueError("the seed secret is empty")
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for part in parts:
        data = str(part).encode("utf-8")
        mac.update(len(data).to_bytes(8, "big"))
        mac.update(data)
    return int.from_bytes(mac.digest()[:8], "big") & _MASK_63


def checked_calls(rounds: int, calls: int, timed_checks: int) -> dict[int, list[int]]:
    """Timed calls whose outputs the judges check, by pair: the last call of the last
    of the first `rounds` pairs, and others drawn at random over those pairs, in the
    evaluator's process, where no runner sees the draw (the judges copy those outputs
    before their stop stamps, so nothing a runner can observe depends on the draw but
    the time of a copy it cannot see). Pairs past `rounds` (problem_run.py, `_more`)
    check their last call and one drawn call each."""
    others = [(k, i) for k in range(rounds) for i in range(calls)][:-1]
    count = min(len(others), timed_checks - 1)
    drawn = {(rounds - 1, calls - 1), *random.SystemRandom().sample(others, max(0, count))}
    plan: dict[int, list[int]] = {}
    for k, i in sorted(drawn):
        plan.setdefault(k, []).append(i)
    return plan
