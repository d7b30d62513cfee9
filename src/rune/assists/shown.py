"""Act on the files shown: a conversation's first turn may not look at what its context holds.

A workspace this small goes into the context whole (:func:`rune.operator.blocks.files_block`,
"you need not read them again"). Yet on the algorithm suite the 1.5B opened every task by
searching the one file of the workspace for the function the task named, and read the answer
it already had: a model call of its own, and the prompt of every later call longer by the
search and its result (``bench/README.md``). So when the whole workspace is shown, the first
turn of a conversation may not call the tools that only look at it (:data:`LOOK_TOOLS`): under
a protocol with a grammar the turn's schema leaves them out, and the model changes the code,
checks it, or answers. From the next turn on it may look as it likes: a change's result does
not show the whole file again.

Only the first turn of a conversation: a later run of the same session may find the files
block evicted from its context by a long history (:mod:`rune.operator.budget`), and a model
that cannot see a file must be able to read it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop

__all__ = ["LOOK_TOOLS", "ActOnFilesShown"]

#: the built-in tools that only look at the workspace (an MCP server's tools are never withheld)
LOOK_TOOLS = frozenset({"read_file", "list_dir", "search"})


class ActOnFilesShown(Assist):
    """Withholds :data:`LOOK_TOOLS` from a conversation's first turn when ``shown()`` says the
    whole workspace is in the context."""

    name = "shown"

    def __init__(self, shown: Callable[[], bool]) -> None:
        self._shown = shown

    def tools_withheld(self, loop: Loop, state: LoopState) -> Collection[str]:
        if any(message.get("role") == "assistant" for message in state.messages):
            return ()
        return LOOK_TOOLS if self._shown() else ()
