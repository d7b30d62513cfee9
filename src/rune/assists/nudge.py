"""Nudge after failure: an answer right after a failed change, command or check goes back once.

Small models give up and say "done" after a change that failed. The first such answer of a run
is sent back with a reminder of what failed (:mod:`rune.outcome` finds it and words it); a
rejection is the operator's word, which the model has already read: no reminder.
"""

from __future__ import annotations

from rune import outcome
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop

__all__ = ["NudgeAfterFailure"]


class NudgeAfterFailure(Assist):
    """Sends the first answer after a failure back, with what failed."""

    name = "nudge"

    def before_answer(self, loop: Loop, state: LoopState) -> str | None:
        found = outcome.problems(state.events, loop.kinds)
        if found and not self.recalled(state).get("nudged") and found[-1].reminds:
            self.memory(state)["nudged"] = True
            return found[-1].reminder()
        return None
