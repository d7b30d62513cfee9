"""A run that ended before its first model turn: the server did not answer, the model is not
there. It ends as every other failure does (the ``✗`` outcome line with the reason, then the
next step, exit 1), not as a bare error: the session it reopened is kept and named."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from rune.cli.exits import EXIT_FAILED
from rune.errors import RuneError
from rune.text import visible


class RunNotStarted(Exception):
    """``error`` stopped the run while Rune was opening it (``session_id``: the session it
    had reopened, None for a new run, which leaves no session behind)."""

    def __init__(self, error: RuneError, session_id: str | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.session_id = session_id


def report(failure: RunNotStarted, console: Console) -> int:
    """The outcome line and the next step; the exit status."""
    error = failure.error
    console.print(Text(f"✗ {error.kind}: {visible(str(error))}", style="bold red"))
    if failure.session_id:
        then = (
            f"the session is kept: `rune resume {failure.session_id}` tries again from the "
            "last good point"
        )
    else:
        then = "no session was started: once that is fixed, run the same command again"
    console.print(Text(then, style="yellow"))
    return EXIT_FAILED
