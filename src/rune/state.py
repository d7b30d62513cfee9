"""The loop's state: :class:`LoopState` while a run goes on, :class:`PendingState` when it
pauses for approval.

A pause ends the run. What it needs to go on later — the conversation, the queued calls, the
budget used, the breaker's streak, the prepared change — is a frozen :class:`PendingState`,
sealed with the user's key (:mod:`rune.seal`) and handed out as plain JSON
(``OperatorResponse.pending_state``, the session journal). This module is the one place that
writes that JSON and reads it back: :meth:`PendingState.to_json`, :meth:`PendingState.from_json`,
and :func:`unseal`, which refuses a state this version of Rune did not write or that was
altered in any field after it was sealed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rune import seal
from rune.errors import ApprovalMismatch, InvalidPendingState
from rune.messages import (
    Message,
    PendingApproval,
    ToolEvent,
    ToolRequest,
    freeze,
    thaw,
)
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
LOOP_PROTOCOLS = (NATIVE, TEXT_FALLBACK, CONSTRAINED)

#: what a call of the current turn answered: (ok, the text the model got)
Outcome = tuple[bool, str]


@dataclass
class LoopState:
    """Everything the loop changes as it runs (mutable; :class:`PendingState` is its frozen
    form)."""

    messages: list[Message]
    protocol: str
    iterations_used: int = 0
    queue: list[ToolRequest] = field(default_factory=list)
    #: the calls of the current turn that were answered, by signature (dedup)
    batch_done: dict[str, Outcome] = field(default_factory=dict)
    streak_signature: str | None = None
    streak_count: int = 0
    events: list[ToolEvent] = field(default_factory=list)
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

    def new_turn(self, queue: list[ToolRequest]) -> None:
        self.queue = queue
        self.batch_done = {}
        self.turn_calls = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingState:
    """A run paused on ``queue[0]``, whose prepared ``change`` waits for approval.

    Frozen: messages are read-only dicts, sequences are tuples. ``seal`` is empty until
    :meth:`sealed` sets it. A state read with :meth:`from_json` keeps that JSON as ``source``:
    the seal is checked on exactly what was read (a field added to it is an alteration too).
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
            protocol=loop.protocol,
            messages=tuple(freeze(m) for m in loop.messages),
            iterations_used=loop.iterations_used,
            iteration_budget=iteration_budget,
            queue=tuple(loop.queue),
            batch_done=freeze(loop.batch_done),
            streak_signature=loop.streak_signature,
            streak_count=loop.streak_count,
            turn_calls=loop.turn_calls,
            events=tuple(loop.events),
            thinking=loop.thinking,
            warnings=tuple(loop.warnings),
            evicted=tuple(loop.evicted),
            change=change,
            opening=loop.opening,
            assists=freeze({k: v for k, v in loop.assists.items() if v}),
            grants=tuple(grants),
        )

    def loop_state(self) -> LoopState:
        """A fresh, mutable copy of the loop's state, to go on from."""
        return LoopState(
            messages=[thaw(m) for m in self.messages],
            protocol=self.protocol,
            iterations_used=self.iterations_used,
            queue=list(self.queue),
            batch_done=dict(self.batch_done),
            streak_signature=self.streak_signature,
            streak_count=self.streak_count,
            events=list(self.events),
            thinking=self.thinking,
            warnings=list(self.warnings),
            evicted=list(self.evicted),
            turn_calls=self.turn_calls,
            opening=self.opening,
            assists={name: thaw(kept) for name, kept in self.assists.items()},
        )

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
        return {
            VERSION_FIELD: STATE_VERSION,
            "model": self.model,
            "protocol": self.protocol,
            "messages": [thaw(m) for m in self.messages],
            "iterations_used": self.iterations_used,
            "iteration_budget": self.iteration_budget,
            "queue": [r.to_json() for r in self.queue],
            "batch_done": {k: list(v) for k, v in self.batch_done.items()},
            "streak": [self.streak_signature, self.streak_count],
            "turn_calls": self.turn_calls,
            "events": [e.to_json() for e in self.events],
            "thinking": self.thinking,
            "warnings": list(self.warnings),
            "evicted": list(self.evicted),
            "change": self.change.to_json(),
            "opening": self.opening,
            "assists": thaw(self.assists),
            "grants": list(self.grants),
            seal.SEAL_FIELD: self.seal,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: object) -> PendingState:
        """The state ``data`` (as :meth:`to_json` wrote it) describes; its seal is read, not
        checked (:func:`unseal` checks it). Anything else is :class:`InvalidPendingState`."""
        data = _check_envelope(data)
        try:
            streak_signature, streak_count = data["streak"]
            state = cls(
                model=str(data["model"]),
                protocol=str(data["protocol"]),
                messages=tuple(freeze(dict(m)) for m in data["messages"]),
                iterations_used=int(data["iterations_used"]),
                iteration_budget=int(data["iteration_budget"]),
                queue=tuple(ToolRequest.from_json(r) for r in data["queue"]),
                batch_done=freeze({str(k): _outcome(v) for k, v in data["batch_done"].items()}),
                streak_signature=_optional_str(streak_signature),
                streak_count=int(streak_count),
                turn_calls=int(data.get("turn_calls", 0)),
                events=tuple(ToolEvent.from_json(e) for e in data["events"]),
                thinking=str(data.get("thinking", "")),
                warnings=tuple(str(w) for w in data.get("warnings", ())),
                evicted=tuple(str(e) for e in data.get("evicted", ())),
                change=PreparedChange.from_json(data["change"]),
                opening=None if data.get("opening") is None else int(data["opening"]),
                assists=_assists(data),
                grants=tuple(str(g) for g in data.get("grants", ())),
                seal=str(data[seal.SEAL_FIELD]),
                source=freeze(data),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InvalidPendingState(f"the pending state is damaged: {err!r}") from None
        return state


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


def unseal(data: PendingState | Mapping[str, Any], key: Callable[[], bytes]) -> PendingState:
    """The state to go on from, once its seal proves it is exactly what was paused.

    ``key`` is called only for a state that has a seal to check (a state that is not a
    pending state at all never creates the user's key). JSON is checked as it came, so a field
    added to it is an alteration too; a :class:`PendingState` on the JSON it was read from, or
    else its own JSON form. What comes back is always read from the JSON that was checked.
    """
    if isinstance(data, PendingState):
        data = data.source if data.source is not None else data.to_json()
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


def _outcome(value: Sequence[Any]) -> Outcome:
    ok, text = value
    return bool(ok), str(text)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
