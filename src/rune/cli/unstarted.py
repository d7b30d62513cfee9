"""A run that ended before its first model turn: the server did not answer, the model is not
there. It ends as every other failure does (the ``✗`` outcome line with the reason, then the
next step, exit 1), not as a bare error: the session it reopened is kept and named."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from rune.cli.exits import EXIT_FAILED
from rune.errors import BackendUnavailable, RuneError
from rune.text import visible

if TYPE_CHECKING:
    from rune.app import Rune


class RunNotStarted(Exception):
    """``error`` stopped the run while Rune was opening it (``session_id``: the session it
    had reopened, None for a new run, which leaves no session behind)."""

    def __init__(self, error: RuneError, session_id: str | None, then: str = "") -> None:
        super().__init__(str(error))
        self.error = error
        self.session_id = session_id
        #: the next step, when it is not "try again"
        self.then = then


def refuse_a_spent_script(rune: Rune) -> None:
    """Stop a run that would ask the scripted backend for a turn its script no longer has (a
    session that replayed it all, continued), before anything is journaled: the session stays
    as it was, and the next step names a real model."""
    from rune.app import script_spent

    if not script_spent(rune.transport):
        return
    error = BackendUnavailable(
        "the scripted backend replays a fixed script (the demo's turns, or RUNE_SCRIPT's), and "
        "this session has had every turn of it: there is no model to go on with"
    )
    then = (
        f"the session {rune.session_id} is kept as it was; the same command with "
        "`--backend ollama` (or a server's URL, or `embedded`) goes on with a real model"
    )
    raise RunNotStarted(error, rune.session_id, then)


def report(failure: RunNotStarted, console: Console) -> int:
    """The outcome line and the next step; the exit status."""
    error = failure.error
    console.print(Text(f"✗ {error.kind}: {visible(str(error))}", style="bold red"))
    if failure.then:
        then = failure.then
    elif failure.session_id:
        then = (
            f"the session is kept: `rune resume {failure.session_id}` tries again from the "
            "last good point"
        )
    else:
        then = "no session was started: once that is fixed, run the same command again"
    console.print(Text(then, style="yellow"))
    return EXIT_FAILED
