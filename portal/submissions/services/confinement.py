"""Whether a result was judged in the sandbox its hardware profile requires (issue 50).

A host names in each finished message the sandbox that ran bundle code
(`environment["sandbox"]`: "bubblewrap", "namespaces" or None) and whether each candidate
was frozen while the reference was timed (`environment["candidate_frozen"]`). A result
judged with less than its profile requires (`HardwareProfile.required_sandbox`,
`requires_frozen`) is flagged when it is recorded: like any flagged result it is shown to
its team with the reason and never ranks. Fails closed: an environment that does not say
is one that did not have it. Only the profiles an operator names in
PKB_RANK_WEAKER_SANDBOX (a development setting) rank such results.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from evaluator.face import PROFILES
from portal.submissions.models import ProblemResult


def confinement_flags(*, profile: str, environment: Any) -> list[str]:
    """The flags that keep results judged in `environment` off `profile`'s boards."""
    if profile in settings.PKB_RANK_WEAKER_SANDBOX:
        return []
    required = PROFILES.get(profile)
    env = environment if isinstance(environment, dict) else {}
    flags = []
    # An unknown profile (retired since it was queued) is held to the strictest rule.
    if env.get("sandbox") != (required.required_sandbox if required else "bubblewrap"):
        flags.append(ProblemResult.Flag.WEAKER_SANDBOX.value)
    if (required is None or required.requires_frozen) and env.get("candidate_frozen") is not True:
        flags.append(ProblemResult.Flag.NOT_FROZEN.value)
    return flags


def with_flags(fields: dict[str, Any], flags: list[str]) -> dict[str, Any]:
    """A reported result's stored fields with `flags` added to those its host reported."""
    return {**fields, "flags": list(dict.fromkeys([*fields["flags"], *flags]))}
