"""Nudge when nothing changed: the first answer of a run that changed nothing goes back once,
when the task asks for a change.

On the algorithm suite the 1.5B model twice answered with an account of the bug ("quicksort
should be called on the left and right sublists...") and changed nothing; the run ended
"answered, no file changed" and the user who asked for a fix had none. So such an answer is sent
back once, asking for the change or for the reason none is needed. Only a run that tried no
change and had no failure of its own: a rejected change is the user's word, a failure has its
own reminder; the project's tests failing before the first turn is why the change is asked for
(the 1.5B, shown a spec task's failing tests, sent a reply cut off at the cap, then answered
"the tests pass now" without a change).

An answer after that which still changes nothing, and gives the reminder back or the same answer
again, goes back once more with the functions the request names written afresh from their
docstrings, where they differ from the file (:mod:`rune.assists.offer`); when the model sends
one of them as its change, only a passing test run of the project's lets the run end done (its
own check is all that tried the rewrite, as with :mod:`rune.assists.rewrite`).
"""

from __future__ import annotations

import re

from rune import outcome
from rune.assists.offer import OFFER_OPENING, offered_rewrites
from rune.assists.rewrite import function_target, only_own_check
from rune.calls import tool_request
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.breaker import LOOP_SOURCE
from rune.tools.python_code import code_of
from rune.tools.spec import Trials, trials_of

__all__ = ["ECHOED", "REMINDER", "REPEATED", "NudgeWhenUnchanged", "asks_for_a_change"]

#: words of a request that asks for files to change
_CHANGE_WORDS = re.compile(
    r"\b(fix(es|ed)?|bugs?|implement|write|add|change|correct|repair|update|rename|refactor|"
    r"create|remove|delete|replace)\b",
    re.IGNORECASE,
)

REMINDER = (
    "No file has been changed yet, and the task asks for a change. Make it now with a tool "
    "(the whole corrected function or file), or answer again and say why no change is needed."
)


#: a piece of the reminder no answer of the model's own would hold
_ECHO = "No file has been changed yet, and the task asks for a change"
#: why a run whose answer echoes the reminder is not done
ECHOED = "the task asks for a change, none was made, and the model's answer repeats Rune's reminder"
#: why a run whose answer is the one sent back, word for word, is not done
REPEATED = (
    "the task asks for a change, none was made, and the model gave the answer Rune sent back "
    "again, word for word"
)


def asks_for_a_change(request: str) -> bool:
    return _CHANGE_WORDS.search(request) is not None


class NudgeWhenUnchanged(Assist):
    """Sends back, once, an answer to a task that asks for a change when nothing changed."""

    name = "unchanged"

    def __init__(self, trials: Trials | None = None) -> None:
        #: None: the loop's executor, when it is one (it reads the files an offer rewrites)
        self._trials = trials

    def start(self, loop: Loop, state: LoopState) -> None:
        # Armed only in a run that starts on the request: a run that goes on with a fresh
        # budget (the operator grants one only after a change) does not see the earlier
        # run's changes in its own events.
        self.memory(state)["armed"] = True

    def before_answer(self, loop: Loop, state: LoopState) -> str | None:
        memory = self.recalled(state)
        if not memory.get("armed") or state.opening is None:
            return None
        if memory.get("nudged"):
            return self._offer(loop, state)
        if not loop.kinds.changes or outcome.changed(state.events, loop.kinds):
            return None
        # The tests as Rune found them before the first turn (rune.assists.tests) failing is
        # why the task asks for a change, not a failure of the model's own.
        own = [e for e in state.events if not (e.source == LOOP_SOURCE and e.iteration == 0)]
        if any(e.name in loop.kinds.changes for e in own) or outcome.problems(own, loop.kinds):
            # a change tried and rejected (the user's word), or a change, command or check
            # that failed: that failure has its own reminder (rune.assists.nudge)
            return None
        if not asks_for_a_change(str(state.messages[state.opening].get("content") or "")):
            return None
        memory = self.memory(state)
        memory["nudged"] = True
        memory["answer"] = _words(state.messages[-1].get("content"))
        return REMINDER

    def _offer(self, loop: Loop, state: LoopState) -> str | None:
        """The functions the request names, written afresh, for an answer after the reminder
        that still changes nothing and does not say why (once a run); else None."""
        trials = trials_of(self._trials, loop.executor)
        if "offered" in self.recalled(state) or trials is None:
            return None
        if self._stalled(loop, state) is None:
            return None
        memory = self.memory(state)
        memory["offered"] = {}
        request = str(state.messages[state.opening or 0].get("content") or "")
        offer = offered_rewrites(loop, state, trials, request, by=self.name)
        if offer is None:
            return None
        text, memory["offered"] = offer
        return text

    def unfinished(self, loop: Loop, state: LoopState) -> str | None:
        return self._stalled(loop, state) or only_own_check(state, self._taken(loop, state))

    def _taken(self, loop: Loop, state: LoopState) -> list[str]:
        """The offered functions (``path::name``) the model made a change of, as offered."""
        offered = self.recalled(state).get("offered") or {}
        taken: list[str] = []
        for event in state.events:
            request = tool_request(event.name, event.arguments)
            target = function_target(request)
            if event.status != "done" or target is None or target[2] not in offered:
                continue
            if code_of(str(event.arguments.get("code") or ""), target[1]) == offered[target[2]]:
                taken.append(target[2])
        return list(dict.fromkeys(taken))

    def _stalled(self, loop: Loop, state: LoopState) -> str | None:
        """An answer that repeats this reminder back is no answer (the 1.5B did, on the
        algorithm and spec suites, and the run ended "answered, no file changed"); nor is the
        answer sent back, given again word for word: it neither makes the change nor says why
        none is needed (the 1.5B on algo 02: "The quicksort function is missing the base case
        ... should ...", twice, and the run ended done with the bug in place)."""
        memory = self.recalled(state)
        if not memory.get("nudged") or not state.messages:
            return None
        if outcome.changed(state.events, loop.kinds):
            return None
        last = state.messages[-1]
        if last.get("role") != "assistant":
            return None
        content = str(last.get("content") or "")
        if _ECHO in content or OFFER_OPENING in content:
            return ECHOED
        if _words(last.get("content")) == memory.get("answer"):
            return REPEATED
        return None


def _words(content: object) -> str:
    """An answer's words, whatever the spacing between them."""
    return " ".join(str(content or "").split())
