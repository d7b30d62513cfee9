"""A transport that replays a script: the test model of tests, benchmarks, demo and canary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rune.errors import ProtocolError
from rune.events import TextDelta, ThinkingDelta
from rune.messages import ChatResult, ToolSource, Usage
from rune.transport.base import DeltaSink


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """What one ``chat`` call was sent (``messages`` is a snapshot of the list)."""

    model: str
    messages: list[Mapping[str, Any]]
    tools: list[Mapping[str, Any]] | None
    think: bool | None
    options: Mapping[str, Any] | None
    response_schema: Mapping[str, Any] | None = None


class ScriptedTransport:
    """Replays ``turns`` in order, one per ``chat`` call.

    Each turn is an assistant message in Ollama's shape
    (``{"content": "...", "tool_calls": [{"function": {"name": ..., "arguments": {...}}}]}``)
    or an exception instance, which is raised instead. Every request is kept in ``requests``.
    """

    def __init__(
        self,
        turns: Iterable[Mapping[str, Any] | BaseException],
        *,
        tools: bool = True,
        thinking: bool = False,
        context_length: int | None = 8192,
        source: ToolSource = "ollama-native",
    ) -> None:
        self._turns = list(turns)
        self._next = 0
        self._tools = tools
        self._thinking = thinking
        self._context_length = context_length
        self.native_source: ToolSource = source
        self.requests: list[ScriptedRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._next

    def supports_tools(self, model: str) -> bool:
        return self._tools

    def supports_thinking(self, model: str) -> bool:
        return self._thinking

    def context_length(self, model: str) -> int | None:
        return self._context_length

    def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        on_delta: DeltaSink | None = None,
        response_schema: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        self.requests.append(
            ScriptedRequest(
                model,
                list(messages),
                None if tools is None else list(tools),
                think,
                options,
                response_schema,
            )
        )
        if self._next >= len(self._turns):
            raise ProtocolError(
                f"the scripted backend has no turn left after {self._next}: it replays a fixed "
                "script, not a model, so it cannot go on from here"
            )
        turn = self._turns[self._next]
        self._next += 1
        if isinstance(turn, BaseException):
            raise turn
        message = {"role": "assistant", "content": "", **turn}
        if on_delta is not None:
            if message.get("thinking"):
                on_delta(ThinkingDelta(message["thinking"]))
            if message["content"]:
                on_delta(TextDelta(message["content"]))
        return ChatResult(message=message, done_reason="stop", usage=Usage())
