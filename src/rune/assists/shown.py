"""Nothing to look up first: when every file of the workspace is in the context, the first
turn of a run that asks for a change does not offer the tools that only read.

On the algorithm suite ("`lcs_length` in lcs.py does not do what its docstring says. Find the
bug and fix it.") the 1.5B model's first turn was a ``search`` for the function in every one of
the 16 tasks, although the whole file was in its context: a model call of 6 to 9 seconds on 2
cores that showed it only lines it had. So that turn may call a tool that changes or checks
the code, or answer; from the second turn on every tool is offered again (a file may have
changed, or the model may need what the context does not hold). The protocol keeps them out
only where its grammar lies outside the prompt (:mod:`rune.formats.constrained`), so the
prompt and the server's cache of it stay the same.
"""

from __future__ import annotations

from collections.abc import Callable

from rune.assists.unchanged import asks_for_a_change
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.tools.files import LIST_DIR, READ_FILE
from rune.tools.search import SEARCH

__all__ = ["READERS", "NothingToLookUp"]

#: the tools that only read the workspace
READERS = frozenset(tool.spec.name for tool in (READ_FILE, LIST_DIR, SEARCH))


class NothingToLookUp(Assist):
    """Withholds :data:`READERS` from the first turn when ``shown_whole()`` says every file of
    the workspace is in the context (:func:`rune.operator.blocks.is_small_workspace`)."""

    name = "shown"

    def __init__(self, shown_whole: Callable[[], bool]) -> None:
        self._shown_whole = shown_whole

    def start(self, loop: Loop, state: LoopState) -> None:
        if state.opening is None:
            return
        request = str(state.messages[state.opening].get("content") or "")
        if asks_for_a_change(request) and self._shown_whole():
            self.memory(state)["whole"] = True

    def withheld_tools(self, loop: Loop, state: LoopState) -> frozenset[str]:
        if not self.recalled(state).get("whole") or _model_spoke(state):
            return frozenset()
        return READERS


def _model_spoke(state: LoopState) -> bool:
    """Whether the model took a turn in this run already."""
    opening = state.opening if state.opening is not None else len(state.messages)
    return any(m.get("role") == "assistant" for m in state.messages[opening + 1 :])
