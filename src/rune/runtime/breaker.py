"""The circuit breaker: a run stops when the model keeps making the same failing call.

Two failures of the same call in a row stop it (``streak``); so do two failures of one call
with only failing calls between (two calls taking turns: a change that changes nothing, a check
that fails, the same change again; each answer will be the same). A call that only reads,
made again right after itself with the same result (:func:`same_again`), fails: the 1.5B read
the same two lines of a library's module six times in a row, to the end of its budget, and
each read worked, so nothing stopped it. (A check made again is the check assist's to judge.)
"""

from __future__ import annotations

from typing import Final

from rune.calls import tool_request
from rune.pause.state import LoopState

__all__ = [
    "BREAKER_THRESHOLD",
    "LOOP_SOURCE",
    "breaker_message",
    "repeat_message",
    "same_again",
    "tripped",
]

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


def same_again(state: LoopState, signature: str, output: str) -> str | None:
    """Why a call that changes nothing (a read) counts as failing, or None: it is the
    model's last call again, and gives what that one gave (nothing the model did since could
    change it). Its second repeat trips the breaker."""
    for event in reversed(state.events):
        if event.source == LOOP_SOURCE:
            continue
        same = tool_request(event.name, event.arguments).signature == signature
        if same and event.status == "failed":
            continue  # this call, refused as a repeat already: the read before it counts
        if not same or event.status != "done" or event.output != output:
            return None
        break
    else:
        return None
    return (
        "this is your last call again, and it gives what it gave then: nothing has changed "
        "since. Act on what it showed (change the code, or answer), or do something else."
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
