"""The exit status of the ``rune`` command (also in ``rune --help`` and the README)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rune.messages import Outcome

EXIT_OK = 0
#: the task failed (an error), or the demo's check did
EXIT_FAILED = 1
#: bad usage or configuration
EXIT_USAGE = 2
#: an approval is waiting (no answer on a non-interactive stdin)
EXIT_PENDING = 3
#: the model answered, but the last change it asked for failed or was rejected, or its answer
#: was cut off
EXIT_INCOMPLETE = 4
#: the iteration budget ran out (``rune resume ID --continue`` goes on)
EXIT_LIMIT = 5
EXIT_INTERRUPTED = 130
#: the output's reader went away (``rune sessions | head``)
EXIT_BROKEN_PIPE = 141

EXIT_MEANINGS = {
    EXIT_OK: "done",
    EXIT_FAILED: "failed",
    EXIT_USAGE: "bad usage or config",
    EXIT_PENDING: "approval waiting",
    EXIT_INCOMPLETE: "answered but not finished",
    EXIT_LIMIT: "iteration budget spent",
    EXIT_INTERRUPTED: "interrupted",
}

#: the exit status of each way a run can end
EXIT_BY_OUTCOME: dict[Outcome, int] = {
    "done": EXIT_OK,
    "incomplete": EXIT_INCOMPLETE,
    "paused": EXIT_PENDING,
    "limit": EXIT_LIMIT,
    "failed": EXIT_FAILED,
}
