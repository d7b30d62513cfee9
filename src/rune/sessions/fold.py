"""The one fold from a journal's records to where its session stands.

``rune resume`` (the operator), ``rune sessions show``, the listing and the open session all
read a journal through :func:`fold`: the conversation, where each user turn starts, the status,
the pause waited on (its state put back whole, as the runtime sealed it), the decision that
answers it, the grants. :class:`Folding` is the same fold kept open, for a session that goes on
appending; :func:`fold` is pure: the same records always give the same state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rune.grants import Grant
from rune.messages import ToolEvent
from rune.sessions.journal import Record
from rune.sessions.records import (
    STATE_RECORDS,
    Decided,
    Granted,
    Header,
    JournalRecord,
    MessageAdded,
    Paused,
    ToolFinished,
    TurnEnded,
    UserTurn,
    read,
)
from rune.sessions.status import Status

_ENDED: dict[str | None, Status] = {
    "done": "done",
    "incomplete": "incomplete",
    "limit": "iteration limit",
}


def ended_status(end: TurnEnded) -> Status:
    """The status a turn's end gives (journals before outcomes were written have only
    ``success`` and ``error_kind``)."""
    if end.outcome in _ENDED:
        return _ENDED[end.outcome]
    if end.outcome is None and end.success:
        return "done"
    if end.error_kind == "IterationLimit":
        return "iteration limit"
    return "failed"


@dataclass(frozen=True, slots=True)
class JournaledPause:
    """A journaled pause: its record's line, the record, and (:attr:`state`) the pending
    state's JSON whole, as the runtime sealed it."""

    line: int
    record: Paused
    #: the conversation and the tool events journaled before the pause: lists that only
    #: grow, of which the pause refers to the first ``before`` items
    conversation: Sequence[Mapping[str, Any]] = field(compare=False, repr=False)
    events: Sequence[Mapping[str, Any]] = field(compare=False, repr=False)
    before: tuple[int, int] = (0, 0)

    @property
    def state(self) -> dict[str, Any]:
        """Put back whole when asked (a fresh dict each time): a session of a thousand
        pauses does not copy its conversation a thousand times to be opened."""
        from rune.pause.state import whole_form  # not at import: ``rune sessions`` starts fast

        messages, events = self.before
        return whole_form(
            self.record.state,
            self.record.shared,
            self.conversation[:messages],
            self.events[:events],
        )


@dataclass(frozen=True, slots=True)
class SessionState:
    header: Header
    #: the conversation: the user turns and everything the loop added, in order
    messages: tuple[Mapping[str, Any], ...]
    #: where the user turns begin in ``messages``
    turn_starts: tuple[int, ...]
    status: Status
    #: the last state-changing record (None: only the header, or nothing)
    last: JournalRecord | None
    #: the pause the session waits on (its last state-changing record)
    waiting: JournaledPause | None
    #: when the last state-changing records are decisions answering a pause: that pause
    answered: JournaledPause | None
    #: messages journaled after the last state-changing record
    messages_since: int
    #: the last turn's end
    ended: TurnEnded | None
    grants: tuple[Grant, ...]


@dataclass
class Folding:
    """The fold, open: :meth:`add` one record at a time, :meth:`state` at any point."""

    header: Header = field(default_factory=Header)
    messages: list[Mapping[str, Any]] = field(default_factory=list)
    events: list[Mapping[str, Any]] = field(default_factory=list)
    turn_starts: list[int] = field(default_factory=list)
    #: where the last user turn's events begin in ``events``
    turn_events_start: int = 0
    status: Status = "new"
    last: JournalRecord | None = None
    pause: JournaledPause | None = None
    answered: JournaledPause | None = None
    messages_since: int = 0
    ended: TurnEnded | None = None
    grants: list[Grant] = field(default_factory=list)

    def add(self, record: Record) -> JournalRecord:
        body = read(record)
        match body:
            case Header():
                self.header = body
            case UserTurn(message=message):
                if not self.header.title:
                    # A session opened before its task was typed (the TUI): the first task
                    # names it, as the task of ``rune run`` does.
                    self.header = replace(self.header, title=title_of(message))
                self.turn_starts.append(len(self.messages))
                self.turn_events_start = len(self.events)
                self.messages.append(message)
                self.status = "running"
            case MessageAdded(message=message):
                self.messages.append(message)
                self.messages_since += 1
            case ToolFinished(event=event):
                self.events.append(event)
            case Paused():
                before = (len(self.messages), len(self.events))
                self.pause = JournaledPause(record.line, body, self.messages, self.events, before)
                self.status = "pending approval"
            case Decided():
                # a decision answers the pause right before it (an approval asked again
                # after a crash adds a second decision to the same pause)
                if isinstance(self.last, Paused):
                    self.answered = self.pause
                elif not isinstance(self.last, Decided):
                    self.answered = None
                self.status = "running"
            case TurnEnded():
                self.ended = body
                self.status = ended_status(body)
            case Granted(grant=grant):
                if grant not in self.grants:
                    self.grants.append(grant)
        if isinstance(body, STATE_RECORDS) and not isinstance(body, Header):
            self.last = body
            self.messages_since = 0
            if not isinstance(body, Decided):
                self.answered = None
        return body

    def state(self) -> SessionState:
        return SessionState(
            header=self.header,
            messages=tuple(self.messages),
            turn_starts=tuple(self.turn_starts),
            status=self.status,
            last=self.last,
            waiting=self.pause if isinstance(self.last, Paused) else None,
            answered=self.answered,
            messages_since=self.messages_since,
            ended=self.ended,
            grants=tuple(self.grants),
        )

    def turn_events(self) -> list[ToolEvent]:
        """The tool events journaled since the last user turn began (unreadable ones left
        out); read only when asked (a resumed turn), not with every :meth:`state`."""
        found = (ToolFinished(raw).tool_event() for raw in self.events[self.turn_events_start :])
        return [event for event in found if event is not None]


#: how much of a task a session's title keeps (``rune sessions`` shows it in one line)
TITLE_CHARS = 80


def title_of(message: Mapping[str, Any]) -> str:
    """A task's first line, cut to :data:`TITLE_CHARS`: the title of the session it starts."""
    lines = str(message.get("content") or "").strip().splitlines()
    return lines[0][:TITLE_CHARS] if lines else ""


def fold(records: Iterable[Record]) -> SessionState:
    """Where the session these records journal stands."""
    folding = Folding()
    for record in records:
        folding.add(record)
    return folding.state()
