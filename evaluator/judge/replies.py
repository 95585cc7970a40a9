"""A runner's reply to a round, read as data before the judge touches a byte of the arena.

Per call a runner says what it copied into the call's room: a kind and (dtype, shape)
items. The reference's report is checked against the room's bounds and gives the slots;
the candidate's is only ever compared with the reference's, equal or a wrong answer, so no
number a candidate writes is used to size, place or allocate anything. Text a runner sends
is stripped of control characters and capped: it ends up on a web page and in a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluator.candidate import arena
from evaluator.candidate.arena import LayoutError, Slot

MAX_NEED_BYTES = 1 << 36  # a reference asking for more room than this is not asking honestly
MAX_TEXT = 300
MAX_TAMPERED = 20


class ReplyError(ValueError):
    """What no runner of ours replies."""


@dataclass(frozen=True)
class Output:
    """What the reference returned from one call, and where it lies in the arena."""

    kind: str
    items: list[list[Any]]  # [dtype, shape] as JSON has them: compared as they are
    slots: list[Slot]
    need: int = 0  # the room was too small: the bytes it needs


def entries(answer: dict[str, Any], calls: int) -> list[dict[str, Any]]:
    found = answer.get("outputs")
    if not (isinstance(found, list) and len(found) == calls):
        raise ReplyError(f"outputs for {calls} calls expected")
    if not all(isinstance(entry, dict) for entry in found):
        raise ReplyError("an output that is not an object")
    return found


def reference_output(entry: dict[str, Any], offset: int, room: int) -> Output:
    """The reference's report of one call, checked against its room."""
    if "foreign" in entry:
        raise ReplyError(f"the reference returned a {clean(entry['foreign'])}")
    kind, items = entry.get("kind"), entry.get("items")
    if kind not in ("tensor", "tuple", "list") or not isinstance(items, list):
        raise ReplyError("an output that is not tensors")
    if kind == "tensor" and len(items) != 1:
        raise ReplyError("one tensor with several items")
    try:
        checked = [Slot.from_json([0, *item], limit=1 << 62) for item in items]
    except (LayoutError, TypeError) as exc:
        raise ReplyError(str(exc)) from None
    slots, end = arena.pack([(s.dtype, s.shape) for s in checked], offset)
    if "need" in entry or end > offset + room:
        if end - offset > MAX_NEED_BYTES:
            raise ReplyError("a room request out of bounds")
        return Output(kind, items, [], need=end - offset)
    return Output(kind, items, slots)


def mismatch(entry: dict[str, Any], expected: Output) -> str:
    """Why the candidate's report of a call differs from the reference's, or ""."""
    want = shown(expected.kind, expected.items)
    if "foreign" in entry:
        return f"returned a {clean(entry['foreign'])} where the reference returns {want}"
    kind, items = entry.get("kind"), entry.get("items")
    if kind != expected.kind or items != expected.items:
        got = shown(kind, items) if isinstance(items, list) else "something else"
        return f"returned {clean(got)} where the reference returns {want}"
    if "device" in entry:
        return f"returned an output on {clean(entry['device'])}, not the rank's device"
    if "need" in entry:
        return "returned outputs larger than the reference's"
    return ""


def shown(kind: Any, items: list[Any]) -> str:
    parts = [f"{i[0]}{tuple(i[1])}" if _pair(i) else "?" for i in items]
    return parts[0] if kind == "tensor" and parts else f"a {kind} of ({', '.join(parts)})"


def _pair(item: Any) -> bool:
    return isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)


def tampered(answer: dict[str, Any]) -> list[str]:
    value = answer.get("tampered", [])
    if not isinstance(value, list):
        raise ReplyError("tampered is not a list")
    return [clean(v) for v in value[:MAX_TAMPERED]]


def clean(value: Any) -> str:
    text = str(value)[:MAX_TEXT]
    return "".join(c if c.isprintable() else "?" for c in text)
