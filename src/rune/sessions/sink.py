"""The journal listens: the events of a turn, written to its session as records.

The operator sends every loop event here before anyone else sees it (:mod:`rune.events`): a
message the loop added, a tool that finished, the turn's pause or its end. What the operator
decides itself (the user's message, an approval, a grant) it writes with :meth:`write`. Each
record is on disk before the event goes on, so a crash loses nothing that was shown.
"""

from __future__ import annotations

from rune import events as ev
from rune.sessions import records
from rune.sessions.store import Session


class JournalSink:
    def __init__(self, session: Session) -> None:
        self.session = session

    def __call__(self, event: ev.LoopEvent) -> None:
        match event:
            case ev.MessageAdded(message=message):
                self.write(records.MessageAdded(message))
            case ev.ToolFinished(event=finished):
                self.write(records.ToolFinished(finished.to_json()))
            case ev.TurnPaused(response=response):
                state = response.pending_state
                if state is not None:
                    self.write(records.Paused(state))
            case ev.TurnEnded(response=response):
                self.write(records.TurnEnded.of(response))

    def write(self, body: records.JournalRecord) -> None:
        self.session.write(body)
