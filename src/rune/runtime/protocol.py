"""What the loop asks of a tool protocol: a :class:`ToolProtocol` strategy per protocol.

The loop (:class:`rune.runtime.runner.Runner`) never asks which protocol it runs: it asks the
protocol for its prompt block, for its part of each model call (tool schemas, a response
schema, how the reply streams), to read a turn into calls, an answer, or a reply it cannot
use, for the message that answers a call, and for the calls of a history nothing answered yet.
Switching protocols mid-run (native calls refused by the server: the text fallback) is setting
``LoopState.protocol`` to another protocol's :attr:`ToolProtocol.name`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rune.calls import native_request
from rune.formats import fallback
from rune.messages import ChatResult, Message, ToolRequest, ToolSource
from rune.runtime.chat import ChatRequest
from rune.transport.base import DeltaSink

__all__ = [
    "TEXT_SOURCES",
    "ToolProtocol",
    "Turn",
    "Unusable",
    "answer_message",
    "assistant_message",
    "thinking_of",
    "unanswered_calls",
]

#: tool sources whose results go back as text (no ``tool_calls`` entry to answer)
TEXT_SOURCES: tuple[ToolSource, ...] = ("text-fallback", "constrained", "blocks")


@dataclass(frozen=True, slots=True)
class Unusable:
    """A reply the model must send again: what it is told, and what the breaker counts (a
    ``name`` for its message and a ``signature`` two identical mistakes share)."""

    feedback: str
    name: str
    signature: str


@dataclass(slots=True)
class Turn:
    """One assistant turn as a protocol reads it: the message to record, and its calls, or its
    answer, or why it cannot be used. ``thinking``: the turn's thinking, when it has some.
    (A value, not frozen only because one is built for every model call.)"""

    message: Message
    calls: list[ToolRequest] = field(default_factory=list)
    answer: str | None = None
    unusable: Unusable | None = None
    thinking: str | None = None


class ToolProtocol(Protocol):
    """How tool calls travel between the loop and the model."""

    #: the name a loop state keeps (``LoopState.protocol``) and events report
    @property
    def name(self) -> str: ...

    @property
    def withholds_answer(self) -> bool:
        """Whether the assists that withhold an answer apply: ``request(answer=False)`` keeps
        the next turn from being an answer (a schema), or an early answer is sent back."""
        ...

    @property
    def answer_schema(self) -> bool:
        """Whether the answer is withheld by the request's schema (an answer that comes anyway
        is a server ignoring it, and is not sent back again); else by sending it back."""
        ...

    def prompt(self) -> str | None:
        """The system block the protocol puts ahead of the conversation, if any."""
        ...

    def request(
        self,
        messages: Sequence[Message],
        *,
        think: bool | None,
        options: Mapping[str, Any] | None,
        sink: DeltaSink,
        answer: bool,
    ) -> ChatRequest:
        """The model call for ``messages``, with the protocol's part (tool schemas, a response
        schema, how deltas reach ``sink``). ``answer``: whether this turn may be the final
        answer (a protocol that cannot enforce it ignores it)."""
        ...

    def read_turn(self, result: ChatResult) -> Turn: ...

    def result_message(self, request: ToolRequest, content: str, *, ok: bool) -> Message: ...

    def turn_message(self, call: ToolRequest) -> Message | None:
        """The assistant message that makes just ``call``, to put in place of the model's own
        (an assist that replaces a call); None: this protocol's turns cannot be replaced."""
        ...

    def unanswered_calls(self, history: Sequence[Message]) -> list[ToolRequest]: ...


def assistant_message(result: ChatResult) -> Message:
    """The assistant turn as the loop records it: content and thinking."""
    message = result.message
    stored: Message = {"role": "assistant", "content": str(message.get("content") or "")}
    if message.get("thinking"):
        stored["thinking"] = message["thinking"]
    return stored


def thinking_of(result: ChatResult) -> str | None:
    thinking = result.message.get("thinking")
    return str(thinking) if thinking else None


def answer_message(request: ToolRequest, content: str, *, ok: bool) -> Message:
    """The message that answers ``request``, in the form it was asked in. A call the model wrote
    as text is answered as text, also on a native model: a ``tool`` message that answers no
    ``tool_calls`` entry is refused by OpenAI-style servers."""
    if request.source in TEXT_SOURCES:
        return {
            "role": "user",
            "content": fallback.format_tool_result(request.name, content, ok=ok),
        }
    message: Message = {"role": "tool", "content": content, "tool_name": request.name}
    if request.call_id:
        message["tool_call_id"] = request.call_id
    return message


def unanswered_calls(
    history: Sequence[Message],
    native_source: ToolSource,
    calls_in: Callable[[str], list[ToolRequest]],
) -> list[ToolRequest]:
    """The calls of the last assistant message that the messages after it do not answer:
    ``tool_calls`` entries past the ``tool`` messages that follow, or, when there are none, the
    calls ``calls_in`` reads from its content."""
    answered = 0
    for message in reversed(history):
        if message.get("role") == "tool":
            answered += 1
            continue
        if message.get("role") != "assistant":
            return []
        if message.get("tool_calls"):
            calls = message["tool_calls"][answered:]
            return [native_request(c, native_source) for c in calls]
        if answered:
            return []
        return calls_in(str(message.get("content") or ""))
    return []
