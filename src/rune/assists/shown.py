"""No reading of files the prompt already shows whole, on a run's first turn.

A small workspace goes into the prompt whole (the files block, :mod:`rune.operator.blocks`):
"Files in the workspace, as they are now (you need not read them again)". Asked to "find the
bug" in one of them, the 1.5B still opened every run of the algorithm suite with
``search(pattern="<the function's name>", path="<its file>")``, and read back the one line it
already had: on 2 cores that call costs about 4 s of the run's 30 (its reply, then the result
read back), and changes nothing the model does next. So on the first turn of a run whose
whole workspace the prompt shows, the turn's schema does not offer the tools that only read
(read_file, search, list_dir); from the second turn on every tool is offered, so a model that
wants to look again after a change still can.

Only a protocol that constrains the reply by a schema withholds a tool
(:meth:`rune.runtime.protocol.ToolProtocol.request`); the others list every tool as before (the
tool list is part of the prompt the server caches). Under greedy decoding the schema changes
nothing on a turn whose reply calls a tool it still offers: the grammar only masks tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.chat import ShapedRequest
from rune.tools.files import LIST_DIR, READ_FILE
from rune.tools.search import SEARCH

__all__ = ["FILES_BLOCK", "READING_TOOLS", "NoReadingOfShownFiles"]

#: the context block that shows the workspace's files (``rune.operator.blocks.files_block``)
FILES_BLOCK = "files"
#: the tools that only read what the files block shows
READING_TOOLS = frozenset({READ_FILE.spec.name, SEARCH.spec.name, LIST_DIR.spec.name})


class NoReadingOfShownFiles(Assist):
    """Withholds the reading tools on the first turn of a run whose prompt shows the whole
    workspace. ``whole`` says whether the files block holds every file of the workspace
    (rather than only the files the request names); the composition root knows how."""

    name = "shown"

    def __init__(self, whole: Callable[[], bool]) -> None:
        self._whole = whole

    def withheld(
        self, loop: Loop, state: LoopState, shaped: ShapedRequest | None
    ) -> frozenset[str]:
        if shaped is None or FILES_BLOCK not in shaped.blocks or not _first_turn(state):
            return frozenset()
        return READING_TOOLS if self._whole() else frozenset()


def _first_turn(state: LoopState) -> bool:
    """Whether the model has not replied yet in this run."""
    if state.opening is None:
        return False
    return not any(m.get("role") == "assistant" for m in state.messages[state.opening :])
