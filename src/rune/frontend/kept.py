"""What a run that did not finish leaves changed, said the same way by every front end.

A run stopped by the breaker, the budget or a failing test leaves its edits in place, right or
wrong, and its outcome line says only why it stopped: the line from :func:`kept_changes` names
the files and the command that takes them all back (``rune undo``, which reads the same change
journal).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rune.app import Rune, session_store
from rune.errors import SessionError
from rune.messages import OperatorResponse
from rune.sessions.changes import history
from rune.text import visible
from rune.tools.display import relative_label


def kept_paths(rune: Rune) -> list[str]:
    """The files whose changes ``rune``'s session leaves applied, as the journal has them."""
    try:
        found = history(session_store().read(rune.session_id).records)
    except SessionError:
        return []
    return sorted({c.path for c in found.changes if c.step in found.applied})


def kept_changes(rune: Rune, response: OperatorResponse, *, cwd: Path | None) -> str | None:
    """The line to show above the outcome of a run that ended but did not finish, or None (the
    run is done or waits for an approval, or its session changed nothing that stands). ``cwd``
    is where the person types the command (None: unknown, as for an editor), so
    ``--workspace`` is added unless it is the run's workspace."""
    if response.outcome in ("done", "paused"):
        return None
    return changes_left(rune, cwd=cwd)


def changes_left(rune: Rune, *, cwd: Path | None) -> str | None:
    """The files the session leaves changed and the undo of them all, whatever the run's end
    (an interrupted run has no response); None when no change stands."""
    paths = kept_paths(rune)
    if not paths:
        return None
    shown = ", ".join(relative_label(Path(path), rune.workspace) for path in paths)
    where = ""
    if cwd is None or cwd.resolve() != rune.workspace:
        where = f" --workspace {shlex.quote(str(rune.workspace))}"
    return visible(
        f"the session's file changes stay in place ({shown}): "
        f"`rune undo {rune.session_id} --all{where}` takes them back",
        keep="",
    )
