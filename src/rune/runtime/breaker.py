"""The circuit breaker: a run stops when the model keeps making the same failing call.

Two failures of the same call in a row stop it (``streak``); so do two failures of one call
with only failing calls between (two calls taking turns: a change that changes nothing, a check
that fails, the same change again; each answer will be the same).
"""

from __future__ import annotations

from typing import Final

from rune.calls import tool_request
from rune.pause.state import LoopState

__all__ = ["BREAKER_THRESHOLD", "LOOP_SOURCE", "breaker_message", "repeat_message", "tripped"]

BREAKER_THRESHOLD = 2
#: the source of the calls the loop (an assist) makes itself: not the model's, never counted
LOOP_SOURCE: Final = "rune"


def breaker_message(name: str, count: int) -> str:
    return (
        f"tool {name} failed {count} consecutive times with identical arguments — "
        "stopping before the iteration budget burns"
    )


def repeat_message(name: str, count: int) -> str:
    return (
        f"tool {name} failed {count} times with identical arguments, with only failing calls "
        "between — stopping before the iteration budget burns"
    )


def tripped(state: LoopState, name: str, signature: str) -> str | None:
    """Count a failure of the call ``signature``; why the run must stop now, or None."""
    if signature == state.streak_signature:
        state.streak_count += 1
    else:
        state.streak_signature, state.streak_count = signature, 1
    if state.streak_count >= BREAKER_THRESHOLD:
        return breaker_message(name, state.streak_count)
    repeats = _failures_since_success(state, signature)
    if repeats >= BREAKER_THRESHOLD:
        return repeat_message(name, repeats)
    return None


def _failures_since_success(state: LoopState, signature: str) -> int:
    """How often the model's call ``signature`` failed since its last call that worked."""
    count = 0
    for event in reversed(state.events):
        if event.source == LOOP_SOURCE:
            continue
        if event.status == "done":
            break
        if event.status in ("failed", "denied"):
            count += tool_request(event.name, event.arguments).signature == signature
    return count
