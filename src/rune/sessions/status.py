"""Where a session stands: a word the listing shows and the journal's fold computes
(:mod:`rune.sessions.fold`). Its own module so that ``rune sessions`` imports no more than it
needs to read the summaries."""

from __future__ import annotations

from typing import Literal, get_args

#: Where a session stands. ``new``: no task yet; ``running``: a turn has begun and not ended
#: (a listing shows ``interrupted`` instead when no process holds the session);
#: ``pending approval``: a change waits; ``done``, ``incomplete`` (answered, but a change failed
#: or was rejected, or the answer was cut off), ``iteration limit`` and ``failed``: how the last
#: turn ended (see ``OperatorResponse.outcome``).
Status = Literal[
    "new",
    "running",
    "interrupted",
    "pending approval",
    "done",
    "incomplete",
    "iteration limit",
    "failed",
]
STATUSES: tuple[Status, ...] = get_args(Status)
