"""The seam for small-model help: an :class:`Assist` is called by the loop at fixed points.

The loop (:class:`rune.runtime.runner.Runner`) runs every assist it was given, in order, at:

- ``start``: before the first model call of a run that starts on a request;
- ``answer_allowed``: the turn's schema (whether the next turn may be the final answer);
- ``refusal``: before a change is prepared (why it may not be made);
- ``after_result``: a call's result (text to add to what the model reads);
- ``after_calls``: after the calls of a turn ran (it may end the run);
- ``before_answer``: the model's final answer (a message that sends it back instead);
- ``unfinished``: the answer that ends the run (why it leaves the task unfinished, when
  the run's events do not show it);
- ``replace_call``: the one call of a turn, before it runs (another call in its place);
- ``replace_reply``: the model's reply, before it is read (another reply in its place).

An assist keeps what it must remember across a pause in ``state.assists[name]`` (sealed with
the pending state); the rest of the loop's state is the loop's. What an assist may ask of the
loop is :class:`Loop`: its model calls go through :meth:`Loop.ask`, so the context budget and
the events see them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rune import events as ev
from rune.messages import ChatResult, Message, OperatorResponse, ToolEvent, ToolRequest, ToolStatus
from rune.outcome import ToolKinds
from rune.pause.state import LoopState
from rune.runtime.chat import ChatRequest, ShapedRequest
from rune.runtime.protocol import ToolProtocol
from rune.tools.spec import Executor

__all__ = ["Assist", "Hooks", "Loop"]


class Loop(Protocol):
    """What the loop offers an assist."""

    @property
    def executor(self) -> Executor: ...

    @property
    def kinds(self) -> ToolKinds:
        """What the executor's tools are to :mod:`rune.outcome`."""
        ...

    def protocol_of(self, state: LoopState) -> ToolProtocol: ...

    def emit(self, event: ev.LoopEvent) -> None: ...

    def note(self, state: LoopState, warning: str) -> None:
        """A warning: kept with the response and sent as an event."""
        ...

    def tool_event(
        self,
        state: LoopState,
        request: ToolRequest,
        status: ToolStatus,
        *,
        output: str | None = None,
        error: str | None = None,
    ) -> ToolEvent: ...

    def refusal(self, state: LoopState, request: ToolRequest) -> str | None:
        """Why an assist forbids the change ``request``, or None."""
        ...

    def finished(self, state: LoopState, text: str) -> OperatorResponse:
        """The run's end with ``text`` as its answer."""
        ...

    def unfinished_reasons(self, state: LoopState, *, besides: Assist | None = None) -> list[str]:
        """Why the assists (all but ``besides``) would find an answer now leaves the task
        unfinished (empty: none would)."""
        ...

    def shape(self, messages: Sequence[Message]) -> tuple[ChatRequest, ShapedRequest | None]:
        """A request of ``messages`` alone (no tools), fitted as the loop's own are (and what
        the shaper made of it, None without one)."""
        ...

    def ask(
        self,
        state: LoopState,
        request: ChatRequest,
        shaped: ShapedRequest | None,
        *,
        by: str,
    ) -> ChatResult:
        """A model call an assist makes (``by``: its name), seen by the budget and the events."""
        ...


class Assist:
    """Small-model help; every hook does nothing unless a subclass says otherwise."""

    #: its namespace in ``LoopState.assists``
    name = "assist"

    def start(self, loop: Loop, state: LoopState) -> None:
        return None

    def answer_allowed(self, loop: Loop, state: LoopState) -> bool:
        return True

    def refusal(self, loop: Loop, state: LoopState, request: ToolRequest) -> str | None:
        return None

    def after_result(
        self, loop: Loop, state: LoopState, request: ToolRequest, status: ToolStatus
    ) -> str:
        return ""

    def after_calls(self, loop: Loop, state: LoopState) -> OperatorResponse | None:
        return None

    def before_answer(self, loop: Loop, state: LoopState) -> str | None:
        return None

    def unfinished(self, loop: Loop, state: LoopState) -> str | None:
        return None

    def replace_call(self, loop: Loop, state: LoopState, call: ToolRequest) -> ToolRequest:
        return call

    def replace_reply(
        self,
        loop: Loop,
        state: LoopState,
        request: ChatRequest,
        shaped: ShapedRequest | None,
        result: ChatResult,
    ) -> ChatResult:
        """``result`` answers ``request`` (as the shaper fitted it: ``shaped``)."""
        return result

    # --- its state ----------------------------------------------------------------------

    def memory(self, state: LoopState) -> dict[str, Any]:
        """This assist's namespace of the loop state (JSON values: it is sealed on a pause)."""
        return state.assists.setdefault(self.name, {})

    def recalled(self, state: LoopState) -> Mapping[str, Any]:
        return state.assists.get(self.name, {})


class Hooks:
    """The assists that take part at each point, in order: an assist that keeps a hook's
    default is not called there (the loop runs its hooks on every call and every turn)."""

    def __init__(self, assists: Sequence[Assist]) -> None:
        def at(hook: str) -> tuple[Assist, ...]:
            return tuple(a for a in assists if hook in _overridden(type(a)))

        self.start = at("start")
        self.answer_allowed = at("answer_allowed")
        self.refusal = at("refusal")
        self.after_result = at("after_result")
        self.after_calls = at("after_calls")
        self.before_answer = at("before_answer")
        self.unfinished = at("unfinished")
        self.replace_call = at("replace_call")
        self.replace_reply = at("replace_reply")


_HOOKS = (
    "start",
    "answer_allowed",
    "refusal",
    "after_result",
    "after_calls",
    "before_answer",
    "unfinished",
    "replace_call",
    "replace_reply",
)


_OVERRIDDEN: dict[type[Assist], frozenset[str]] = {}


def _overridden(kind: type[Assist]) -> frozenset[str]:
    """The hooks an assist class defines itself (looked up once per class)."""
    if kind not in _OVERRIDDEN:
        _OVERRIDDEN[kind] = frozenset(
            h for h in _HOOKS if getattr(kind, h) is not getattr(Assist, h)
        )
    return _OVERRIDDEN[kind]
