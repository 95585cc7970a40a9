"""Trial seeds derived from a host secret.

Rank processes only ever see the derived seeds: the secret stays in the evaluator's parent
process, so neither a candidate nor anyone reading the public repository can predict the
inputs of an evaluation.
"""

from __future__ import annotations

import hashlib
import hmac

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
