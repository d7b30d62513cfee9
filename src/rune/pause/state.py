"""The loop's state: :class:`LoopState` while a run goes on, :class:`PendingState` when it
pauses for approval.

A pause ends the run. What it needs to go on later — the conversation, the queued calls, the
budget used, the breaker's streak, the prepared change — is a frozen :class:`PendingState`,
sealed with the user's key (:mod:`rune.pause.seal`) and handed out as plain JSON
(``OperatorResponse.pending_state``, the session journal). This module is the one place that
writes that JSON and reads it back: :meth:`PendingState.to_json`, :meth:`PendingState.from_json`,
and :func:`unseal`, which refuses a state this version of Rune did not write or that was
altered in any field after it was sealed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rune.errors import ApprovalMismatch, InvalidPendingState
from rune.messages import (
    Message,
    PendingApproval,
    ToolEvent,
    ToolRequest,
    freeze,
    leading_system,
    thaw,
)
from rune.pause import seal
from rune.tools.spec import PreparedChange

#: 2: the seal is an HMAC over every field (version 1 states carried a plain SHA-256 of the
#: request and the change, which anyone could recompute); 3: the state carries the session's
#: read grants, and a change may be an approved read (``PreparedChange.grant``)
STATE_VERSION = 3
#: versions this one reads: a version 2 state is a version 3 state without grants
READABLE_VERSIONS = (2, 3)
#: the JSON field that says "a pending state, in this version's form"
VERSION_FIELD = "rune_pending_state"
#: the protocols a loop runs (``LocalToolRuntime`` chooses one; "auto" is not among them)
NATIVE = "native"
TEXT_FALLBACK = "text-fallback"
CONSTRAINED = "constrained"
BLOCKS = "blocks"
LOOP_PROTOCOLS = (NATIVE, TEXT_FALLBACK, CONSTRAINED, BLOCKS)

#: what a call of the current turn answered: (ok, the text the model got)
Outcome = tuple[bool, str]


@dataclass
class LoopState:
    """Everything the loop changes as it runs (mutable; :class:`PendingState` is its frozen
    form, and :data:`LOOP_FIELDS` says how each field goes from one to the other)."""

    messages: list[Message]
    protocol: str
    iterations_used: int = 0
    queue: list[ToolRequest] = field(default_factory=list)
    #: the calls of the current turn that were answered, by signature (dedup)
    batch_done: dict[str, Outcome] = field(default_factory=dict)
    streak_signature: str | None = None
    streak_count: int = 0
    events: list[ToolEvent] = field(default_factory=list)
    #: the tool events of the turn's runs before this one (a budget spent, a run cut short):
    #: how the turn ends counts them (``Endings.finished``); the assists see ``events`` only
    earlier: list[ToolEvent] = field(default_factory=list)
    thinking: str = ""
    warnings: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    #: calls of the current assistant turn that ran (or were prepared); see MAX_CALLS_PER_TURN
    turn_calls: int = 0
    #: where the request that opened this run is in ``messages`` (None: the run did not
    #: start on a request)
    opening: int | None = None
    #: what each assist keeps (``rune.runtime.assist``), by its name: JSON values
    assists: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: how many messages of the conversation (after the leading system messages) were
    #: announced (``events.MessageAdded``); those the loop was given count as announced
    announced: int = field(init=False)

    def __post_init__(self) -> None:
        self.announced = len(self.messages) - leading_system(self.messages)

    def unannounced(self) -> list[Message]:
        """The conversation's messages not announced yet; they count as announced now."""
        lead = leading_system(self.messages)
        fresh = self.messages[lead + self.announced :]
        self.announced += len(fresh)
        return fresh

    def place_opening(self, opening: int | None, given: int) -> None:
        """Where the request this run works on is: ``opening`` of the ``given`` messages the
        run started with (a prompt may since stand ahead of them), else the last message when
        it is the user's."""
        if opening is not None and 0 <= opening < given:
            self.opening = opening + len(self.messages) - given
        elif self.messages and self.messages[-1].get("role") == "user":
            self.opening = len(self.messages) - 1

    def put_system(self, prompt: str) -> None:
        """``prompt`` as a system message after the caller's and before the conversation."""
        self.messages.insert(leading_system(self.messages), {"role": "system", "content": prompt})

    def new_turn(self, queue: list[ToolRequest]) -> None:
        self.queue = queue
        self.batch_done = {}
        self.turn_calls = 0


# --- one field, one line: how it is frozen, thawed, written and read -------------------------

_REQUIRED: Any = object()


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class Field:
    """One field of :class:`PendingState`: ``freeze`` takes it from a :class:`LoopState`
    (None: the field is the pause's own), ``thaw`` gives it back to one; ``dump`` writes it to
    JSON and ``load`` reads it; ``missing`` is its value in a state of an older version that
    did not have it (none: the field is required)."""

    name: str
    freeze: Callable[[Any], Any] | None = _same
    thaw: Callable[[Any], Any] = _same
    dump: Callable[[Any], Any] = _same
    load: Callable[[Any], Any] = _same
    missing: Any = _REQUIRED
    #: written only when it holds something: a field added later, so that a state without it
    #: is written (and sealed) as the Rune before it wrote it
    sparse: bool = False


def _frozen_messages(messages: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(freeze(dict(m)) for m in messages)


def _thawed_list(values: Iterable[Any]) -> list[Any]:
    return [thaw(v) for v in values]


def _texts(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _outcome(value: Sequence[Any]) -> Outcome:
    ok, text = value
    return bool(ok), str(text)


def _jsons(values: Iterable[Any]) -> list[Any]:
    return [v.to_json() for v in values]


def _tool_events(values: Iterable[Any]) -> tuple[ToolEvent, ...]:
    return tuple(ToolEvent.from_json(e) for e in values)


#: the loop's fields, in the order a pending state's JSON has them
LOOP_FIELDS: tuple[Field, ...] = (
    Field("protocol", load=str),
    Field("messages", _frozen_messages, _thawed_list, _thawed_list, _frozen_messages),
    Field("iterations_used", load=int),
    Field(
        "queue",
        tuple,
        list,
        _jsons,
        lambda v: tuple(ToolRequest.from_json(r) for r in v),
    ),
    Field(
        "batch_done",
        freeze,
        dict,
        lambda v: {k: list(o) for k, o in v.items()},
        lambda v: freeze({str(k): _outcome(o) for k, o in v.items()}),
    ),
    Field("streak_signature", load=_optional_str),
    Field("streak_count", load=int),
    Field("turn_calls", load=int, missing=0),
    Field("events", tuple, list, _jsons, _tool_events),
    Field("earlier", tuple, list, _jsons, _tool_events, missing=(), sparse=True),
    Field("thinking", load=str, missing=""),
    Field("warnings", tuple, list, list, _texts, missing=()),
    Field("evicted", tuple, list, list, _texts, missing=()),
    Field("opening", load=_optional_int, missing=None),
    # (read by _assists from the whole state: older states kept two assists as fields)
    Field(
        "assists",
        lambda v: freeze({name: kept for name, kept in v.items() if kept}),
        lambda v: {name: thaw(kept) for name, kept in v.items()},
        thaw,
    ),
)
#: the pause's own fields
PAUSE_FIELDS: tuple[Field, ...] = (
    Field("model", None, load=str),
    Field("iteration_budget", None, load=int),
    Field("change", None, dump=PreparedChange.to_json, load=PreparedChange.from_json),
    Field("grants", None, dump=list, load=_texts, missing=()),
)
FIELDS = (*LOOP_FIELDS, *PAUSE_FIELDS)
#: the one place the JSON form is not one key per field: the breaker's streak is one pair
_STREAK = ("streak_signature", "streak_count")


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingState:
    """A run paused on ``queue[0]``, whose prepared ``change`` waits for approval.

    Frozen: messages are read-only dicts, sequences are tuples. ``seal`` is empty until
    :meth:`sealed` sets it. A state read with :meth:`from_json` keeps that JSON as ``source``:
    the seal is checked on exactly what was read (a field added to it is an alteration too).
    Every field but ``seal`` and ``source`` is in :data:`FIELDS`, which says how it is copied
    from and to the loop and written and read.
    """

    model: str
    protocol: str
    messages: tuple[Mapping[str, Any], ...]
    iterations_used: int
    iteration_budget: int
    queue: tuple[ToolRequest, ...]
    batch_done: Mapping[str, Outcome]
    streak_signature: str | None
    streak_count: int
    turn_calls: int
    events: tuple[ToolEvent, ...]
    thinking: str
    warnings: tuple[str, ...]
    evicted: tuple[str, ...]
    change: PreparedChange
    opening: int | None = None
    #: the events of the turn's runs before this one (``LoopState.earlier``)
    earlier: tuple[ToolEvent, ...] = ()
    #: the assists' own state (``LoopState.assists``)
    assists: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: the directory trees the user let the session read before this pause
    grants: tuple[str, ...] = ()
    seal: str = ""
    source: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    # --- to and from the loop -----------------------------------------------------------

    @classmethod
    def of(
        cls,
        loop: LoopState,
        *,
        model: str,
        iteration_budget: int,
        change: PreparedChange,
        grants: Sequence[str] = (),
    ) -> PendingState:
        """The loop paused on ``loop.queue[0]``, whose prepared change is ``change``."""
        return cls(
            model=model,
            iteration_budget=iteration_budget,
            change=change,
            grants=tuple(grants),
            **{f.name: f.freeze(getattr(loop, f.name)) for f in LOOP_FIELDS if f.freeze},
        )

    def loop_state(self) -> LoopState:
        """A fresh, mutable copy of the loop's state, to go on from."""
        return LoopState(**{f.name: f.thaw(getattr(self, f.name)) for f in LOOP_FIELDS})

    @property
    def request(self) -> ToolRequest:
        """The request the pause waits on."""
        return self.queue[0]

    @property
    def approval(self) -> PendingApproval:
        """What the operator is asked to approve, read from the change ``approve`` would apply
        (never from a separate description that could say something else)."""
        return approval_of(self.change)

    # --- the seal -----------------------------------------------------------------------

    def sealed(self, key: bytes) -> PendingState:
        """This state with its seal: an HMAC over every other field of its JSON form."""
        return replace(self, seal=seal.sign(self.to_json(), key), source=None)

    # --- JSON ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The state as JSON (a fresh dict each time): what the seal covers, what the journal
        and a library caller keep, what :meth:`from_json` reads. A state that was read is
        written exactly as it was read (an older version's state keeps its version)."""
        if self.source is not None:
            return dict(thaw(self.source))
        data: dict[str, Any] = {VERSION_FIELD: STATE_VERSION}
        for f in FIELDS:
            value = getattr(self, f.name)
            if value or not f.sparse:
                data[f.name] = f.dump(value)
        data["streak"] = [data.pop(name) for name in _STREAK]
        data[seal.SEAL_FIELD] = self.seal
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: object) -> PendingState:
        """The state ``data`` (as :meth:`to_json` wrote it) describes; its seal is read, not
        checked (:func:`unseal` checks it). Anything else is :class:`InvalidPendingState`."""
        data = _check_envelope(data)
        try:
            fields = dict(data)
            fields.update(zip(_STREAK, data["streak"], strict=True))
            fields["assists"] = _assists(data)
            values = {f.name: _read(f, fields) for f in FIELDS}
            return cls(**values, seal=str(data[seal.SEAL_FIELD]), source=freeze(data))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InvalidPendingState(f"the pending state is damaged: {err!r}") from None


def _assists(data: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    """The assists' state: ``assists`` by name; a state written before there was one carries
    the two that existed as fields of their own (``nudged``, ``repairs``)."""
    found = data.get("assists", {})
    if not isinstance(found, Mapping) or not all(isinstance(v, Mapping) for v in found.values()):
        raise ValueError("assists must map each assist's name to an object")
    assists = {str(name): dict(kept) for name, kept in found.items()}
    if data.get("nudged"):
        assists.setdefault("nudge", {"nudged": True})
    if data.get("repairs"):
        assists.setdefault("repair", {"repairs": int(data["repairs"])})
    frozen: Mapping[str, Mapping[str, Any]] = freeze(assists)
    return frozen


def _read(f: Field, data: Mapping[str, Any]) -> Any:
    if f.name not in data and f.missing is not _REQUIRED:
        return f.missing
    return f.load(data[f.name])


def unseal(data: PendingState | Mapping[str, Any], key: Callable[[], bytes]) -> PendingState:
    """The state to go on from, once its seal proves it is exactly what was paused.

    ``key`` is called only for a state that has a seal to check (a state that is not a
    pending state at all never creates the user's key). JSON is checked as it came, so a field
    added to it is an alteration too; a :class:`PendingState` on the JSON it was read from, or
    else its own JSON form. What comes back is always read from the JSON that was checked.
    """
    if isinstance(data, PendingState):
        data = data.to_json()
    data = _check_envelope(data)
    if not seal.verify(data, key()):
        # Any field: the change and its preview, but also the messages, the queue and the
        # budget a resumed loop would trust.
        raise ApprovalMismatch(
            "the pending state was altered after it was prepared, or sealed by another "
            "Rune user's key; approval binds to exactly what was shown, so nothing was "
            "applied"
        )
    state = PendingState.from_json(data)
    if not state.queue or state.protocol not in LOOP_PROTOCOLS:
        raise InvalidPendingState("the pending state has no request waiting for approval")
    request = state.request
    if state.change.tool != request.name or state.change.arguments != request.arguments:
        raise ApprovalMismatch(
            f"the pending {request.name} request does not match the change that was shown; "
            "nothing was applied"
        )
    return state


def approval_of(change: PreparedChange) -> PendingApproval:
    return PendingApproval(
        name=change.tool,
        arguments=change.arguments,
        summary=change.summary,
        preview=change.preview,
        contained=change.contained,
        sensitive=change.sensitive,
        grant=change.grant,
    )


def _check_envelope(data: object) -> Mapping[str, Any]:
    """``data`` if it says it is a sealed pending state of a version this one reads."""
    if not isinstance(data, Mapping) or VERSION_FIELD not in data:
        raise InvalidPendingState("this is not a pending approval written by Rune")
    version = data[VERSION_FIELD]
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise InvalidPendingState(
            f"this pending approval has version {version!r}, which this version of Rune does "
            f"not read (it reads versions {', '.join(map(str, READABLE_VERSIONS))}); send the task "
            "again, or resume it with the Rune that wrote it"
        )
    if not isinstance(data.get(seal.SEAL_FIELD), str):
        raise InvalidPendingState("the pending state is damaged: it has no seal")
    return data


# --- the journal's form -------------------------------------------------------------------


#: what a pause's journal record leaves out because the journal already holds it: the state's
#: leading system messages kept (``lead``), the first ``messages`` messages of the conversation
#: after them, and the last ``events`` tool events journaled before the pause
#: (``rune.sessions.records.Shared`` names them)
Refs = tuple[int, int, int]


def journal_form(
    state: Mapping[str, Any],
    conversation: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, Any], Refs | None]:
    """``state`` (a pending state's JSON) without what a journal holding ``conversation`` and
    the tool ``events`` already has, and what was left out; :func:`whole_form` undoes it. The
    journal then grows linearly: a pause need not carry the whole conversation again."""
    messages, ran = state.get("messages"), state.get("events")
    if not isinstance(messages, list) or not isinstance(ran, list):
        return dict(state), None
    lead = 0
    while lead < len(messages) and _role(messages[lead]) == "system":
        lead += 1
    own = messages[lead:]
    shared = min(len(conversation), len(own))
    if shared and (own[0] != conversation[0] or own[shared - 1] != conversation[shared - 1]):
        shared = 0
    journaled = list(events[len(events) - len(ran) :]) if len(ran) <= len(events) else None
    shared_events = len(ran) if journaled == ran else 0
    if not shared and not shared_events:
        return dict(state), None
    compact = {**state, "messages": messages[:lead] + own[shared:], "events": ran[shared_events:]}
    return compact, (lead, shared, shared_events)


def whole_form(
    compact: Mapping[str, Any],
    shared: Refs | None,
    conversation: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The pending state's JSON exactly as the runtime wrote it (so its seal still verifies),
    from its journal form and the conversation and tool events journaled before it."""
    whole = copy.deepcopy(dict(compact))
    if shared is None:
        return whole
    lead, count, events_count = shared
    if len(conversation) < count or len(events) < events_count:
        return whole  # the journal lost what the pause refers to: the seal will say so
    messages = list(whole.get("messages") or [])
    whole["messages"] = [
        *messages[:lead],
        *copy.deepcopy(list(conversation[:count])),
        *messages[lead:],
    ]
    journaled = list(events[len(events) - events_count :]) if events_count else []
    whole["events"] = [*copy.deepcopy(journaled), *(whole.get("events") or [])]
    return whole


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, Mapping) else None
