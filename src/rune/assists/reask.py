"""Ask again when a reply is cut off: a greedy loop is not sent back to the model that made it.

A small model under greedy decoding falls into a loop (the 1.5B, asked to write a function
from its spec, wrote ``from datetime import weekday, isoweekday, isocalendar, weekday, ...``),
and the repetition guard (:mod:`rune.transport.repetition`) or the output cap cuts the reply.
Sent back as unusable, the loop's start stays in the context and the next greedy turn is worse:
on the spec suite the model then answered "the tests pass now" with nothing written, or echoed
Rune's own reminder as its answer. So a reply cut off is not read at all: the same request is
asked again, sampled (:data:`TEMPERATURE`, a seed of its own, so a run repeats), until a reply
is not cut off, and that reply is read in its place. At most :data:`MAX_REASKS` a run; the last
reply cut off is read as it is (the protocol sends it back as unusable). Each re-ask is an
assist's model call, outside the step count, as the sampled repair's are.
"""

from __future__ import annotations

from dataclasses import replace

from rune.messages import ChatResult
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.chat import ChatRequest, ShapedRequest

__all__ = ["FIRST_SEED", "MAX_REASKS", "TEMPERATURE", "ReaskWhenCut"]

#: re-asks in one run
MAX_REASKS = 2
TEMPERATURE = 0.7
#: the seed of the first re-ask (the next ones count up)
FIRST_SEED = 301


class ReaskWhenCut(Assist):
    """Puts a sampled reply in place of one cut off (a loop the guard stopped, or the cap)."""

    name = "reask"

    def replace_reply(
        self,
        loop: Loop,
        state: LoopState,
        request: ChatRequest,
        shaped: ShapedRequest | None,
        result: ChatResult,
    ) -> ChatResult:
        while result.done_reason == "length":
            asked = int(self.recalled(state).get("asked", 0))
            if asked >= MAX_REASKS:
                break
            self.memory(state)["asked"] = asked + 1
            sampling = {**(request.options or {}), "temperature": TEMPERATURE}
            sampling["seed"] = FIRST_SEED + asked
            # not streamed: a protocol's stream reader (the constrained one parses as it
            # goes) has read the cut reply already
            again = replace(request, options=sampling, on_delta=None)
            loop.note(
                state,
                f"the model's reply was cut off; Rune asked again (sampled at temperature "
                f"{TEMPERATURE}) and reads the new reply instead",
            )
            result = loop.ask(state, again, shaped, by=self.name)
        return result
