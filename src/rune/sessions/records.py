"""The journal's records, typed: one frozen dataclass per kind, one union, one adapter.

On disk a record is ``{"kind": ..., "ts": ..., "data": {...}}`` (:mod:`rune.sessions.journal`);
:func:`read` turns its ``data`` into the record of its kind and :func:`data_of` is what a
writer puts there, so no reader looks into a raw dict. The on-disk form is unchanged: a journal
written before these types existed reads the same. Data that does not fit its kind (a damaged
or foreign line) reads as :class:`Unreadable`, which every reader passes over, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from rune.grants import Grant
from rune.messages import OperatorResponse, ToolEvent
from rune.sessions import journal
from rune.sessions.journal import Record

Json = Mapping[str, Any]
Decision = Literal["approved", "rejected"]


@dataclass(frozen=True, slots=True)
class Header:
    """The session's first record: what it runs and where."""

    model: str = ""
    workspace: str = ""
    backend: str = ""
    title: str = ""
    created_at: str = ""


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A user turn begins with this message."""

    message: Json


@dataclass(frozen=True, slots=True)
class MessageAdded:
    """A message the loop added to the conversation (an assistant turn, a tool result)."""

    message: Json


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call finished. ``event`` stays as written: a pause refers to journaled events by
    count, and its seal covers their exact JSON."""

    event: Json

    def tool_event(self) -> ToolEvent | None:
        try:
            return ToolEvent.from_json(self.event)
        except (TypeError, ValueError, AttributeError, KeyError):
            return None


class Shared(NamedTuple):
    """What a pause's record leaves out because the journal already holds it
    (``rune.pause.state.journal_form``): the first ``messages`` messages of the conversation after
    the state's ``lead`` system messages, and the last ``events`` tool events before it."""

    lead: int = 0
    messages: int = 0
    events: int = 0


@dataclass(frozen=True, slots=True)
class Paused:
    """The loop paused for approval; ``state`` is its pending state in the journal's form."""

    state: Json
    shared: Shared | None = None

    @property
    def change(self) -> Json:
        """The prepared change the pause showed (empty when the state is damaged)."""
        change = self.state.get("change")
        return change if isinstance(change, Mapping) else {}


@dataclass(frozen=True, slots=True)
class Decided:
    decision: Decision
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """How a user turn ended: the response's summary."""

    success: bool
    outcome: str | None = None
    incomplete: str | None = None
    changed: bool = False
    text: str = ""
    error: str | None = None
    error_kind: str | None = None
    iterations_used: int = 0
    iteration_budget: int = 0
    evicted: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, response: OperatorResponse) -> TurnEnded:
        return cls(
            success=response.success,
            outcome=response.outcome,
            incomplete=response.incomplete,
            changed=response.changed,
            text=response.text,
            error=response.error,
            error_kind=response.error_kind,
            iterations_used=response.iterations_used,
            iteration_budget=response.iteration_budget,
            evicted=tuple(response.evicted),
            warnings=tuple(response.warnings),
        )

    @property
    def ended(self) -> str:
        """The outcome, also for journals written before outcomes were (only ``success``)."""
        return self.outcome or ("done" if self.success else "failed")


@dataclass(frozen=True, slots=True)
class ChangeMade:
    """A file change applied (read by :mod:`rune.sessions.changes`, which checks it)."""

    data: Json


@dataclass(frozen=True, slots=True)
class Undone:
    """Changes taken back or brought back (read by :mod:`rune.sessions.changes`)."""

    data: Json


@dataclass(frozen=True, slots=True)
class Granted:
    grant: Grant


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A record whose data does not fit its kind; readers pass over it."""

    kind: str


JournalRecord = (
    Header
    | UserTurn
    | MessageAdded
    | ToolFinished
    | Paused
    | Decided
    | TurnEnded
    | ChangeMade
    | Undone
    | Granted
    | Unreadable
)
#: the record types that change where a session stands
STATE_RECORDS = (Header, UserTurn, Paused, Decided, TurnEnded)


def read(record: Record) -> JournalRecord:
    """The typed record ``record`` holds."""
    data = record.data
    match record.kind:
        case journal.SESSION:
            return Header(**{k: str(data.get(k, "")) for k in Header.__dataclass_fields__})
        case journal.USER | journal.MESSAGE:
            message = data.get("message")
            if not isinstance(message, dict):
                return Unreadable(record.kind)
            return UserTurn(message) if record.kind == journal.USER else MessageAdded(message)
        case journal.TOOL_EVENT:
            event = data.get("event")
            return ToolFinished(event) if isinstance(event, Mapping) else Unreadable(record.kind)
        case journal.PENDING:
            return _paused(data)
        case journal.DECISION:
            approved = data.get("decision") == "approved"
            return Decided("approved" if approved else "rejected", str(data.get("reason") or ""))
        case journal.TURN_END:
            return _turn_ended(data)
        case journal.CHANGE:
            return ChangeMade(data)
        case journal.UNDO:
            return Undone(data)
        case journal.GRANT:
            grant = Grant.from_json(data)
            return Granted(grant) if grant is not None else Unreadable(record.kind)
    return Unreadable(record.kind)


def kind_of(body: JournalRecord) -> str:
    return _KINDS[type(body)]


def data_of(body: JournalRecord) -> dict[str, Any]:
    """What a writer puts in the record's ``data``: the form journals have always had."""
    match body:
        case Header():
            return {k: getattr(body, k) for k in Header.__dataclass_fields__}
        case UserTurn(message=message) | MessageAdded(message=message):
            return {"message": dict(message)}
        case ToolFinished(event=event):
            return {"event": dict(event)}
        case Paused(state=state, shared=shared):
            found: dict[str, Any] = {"state": dict(state)}
            if shared is not None:
                found["shared"] = {
                    "lead": shared.lead,
                    "messages": shared.messages,
                    "events": shared.events,
                }
            return found
        case Decided(decision=decision, reason=reason):
            return {"decision": decision, "reason": reason}
        case TurnEnded():
            return {
                "success": body.success,
                "outcome": body.outcome,
                "incomplete": body.incomplete,
                "changed": body.changed,
                "text": body.text,
                "error": body.error,
                "error_kind": body.error_kind,
                "iterations_used": body.iterations_used,
                "iteration_budget": body.iteration_budget,
                "evicted": list(body.evicted),
                "warnings": list(body.warnings),
            }
        case ChangeMade(data=data) | Undone(data=data):
            return dict(data)
        case Granted(grant=grant):
            return grant.to_json()
        case Unreadable():
            raise ValueError("an unreadable record is never written")


_KINDS: dict[type[Any], str] = {
    Header: journal.SESSION,
    UserTurn: journal.USER,
    MessageAdded: journal.MESSAGE,
    ToolFinished: journal.TOOL_EVENT,
    Paused: journal.PENDING,
    Decided: journal.DECISION,
    TurnEnded: journal.TURN_END,
    ChangeMade: journal.CHANGE,
    Undone: journal.UNDO,
    Granted: journal.GRANT,
}


def _paused(data: Json) -> JournalRecord:
    state = data.get("state")
    if not isinstance(state, Mapping):
        return Unreadable(journal.PENDING)
    refs = data.get("shared")
    if not isinstance(refs, Mapping):
        return Paused(state)
    try:
        shared = Shared(*(int(refs.get(k, 0)) for k in ("lead", "messages", "events")))
    except (TypeError, ValueError):
        return Paused(state)  # its seal will say the state is not whole
    return Paused(state, shared)


def _turn_ended(data: Json) -> TurnEnded:
    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    def count(key: str) -> int:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def texts(key: str) -> tuple[str, ...]:
        value = data.get(key)
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    return TurnEnded(
        success=bool(data.get("success")),
        outcome=text("outcome"),
        incomplete=text("incomplete"),
        changed=bool(data.get("changed")),
        text=text("text") or "",
        error=text("error"),
        error_kind=text("error_kind"),
        iterations_used=count("iterations_used"),
        iteration_budget=count("iteration_budget"),
        evicted=texts("evicted"),
        warnings=texts("warnings"),
    )
