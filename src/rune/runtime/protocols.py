"""The three tool protocols (docs/protocols.md): ``native`` tool calls, the ``text-fallback``
protocol (calls written in the reply, :mod:`rune.formats.fallback`) and the ``constrained`` protocol
(one JSON object per turn that the server's grammar allows, :mod:`rune.formats.constrained`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rune.calls import native_request, tool_request
from rune.formats import constrained, fallback
from rune.messages import ChatResult, Message, ToolRequest, ToolSource, thaw
from rune.pause.state import BLOCKS, CONSTRAINED, NATIVE, TEXT_FALLBACK
from rune.runtime import blocks
from rune.runtime.chat import ChatRequest
from rune.runtime.protocol import (
    ToolProtocol,
    Turn,
    Unusable,
    answer_message,
    assistant_message,
    thinking_of,
    unanswered_calls,
)
from rune.tools.spec import ToolSpec
from rune.transport.base import DeltaSink
from rune.transport.repetition import REPEATED

__all__ = [
    "PROTOCOLS",
    "BlocksProtocol",
    "ConstrainedProtocol",
    "NativeProtocol",
    "TextProtocol",
    "choose_protocol",
    "likely_protocol",
    "standard_protocol",
]

#: what ``protocol=`` takes: "auto" is Rune's rule (native when discovery says the model has
#: tools, else the text fallback; see docs/protocols.md); the others force one protocol
PROTOCOLS = ("auto", "native", "text", "constrained", "blocks")
_FORCED = {"text": TEXT_FALLBACK, "constrained": CONSTRAINED, "blocks": BLOCKS}
#: the protocol for a model discovery says has tools, and for one it says has none
_DISCOVERED = {"native": (NATIVE, NATIVE), "auto": (NATIVE, TEXT_FALLBACK)}


def likely_protocol(setting: str) -> str:
    """The protocol a run of ``setting`` uses unless discovery says otherwise."""
    return _FORCED.get(setting, NATIVE)


def choose_protocol(setting: str, supports_tools: Callable[[], bool]) -> str:
    """The protocol a run of ``setting`` (one of :data:`PROTOCOLS`) uses; ``supports_tools``
    asks discovery (also for "native": a server that cannot be reached fails here)."""
    if setting in _FORCED:
        return _FORCED[setting]
    with_tools, without = _DISCOVERED[setting]
    return with_tools if supports_tools() else without


class _Tools:
    """What every protocol knows of the tool set and the transport."""

    def __init__(self, specs: Sequence[ToolSpec], native_source: ToolSource) -> None:
        self.specs = tuple(specs)
        self.tool_names = frozenset(spec.name for spec in specs)
        self.native_source = native_source

    withholds_answer = False
    answer_schema = False

    result_message = staticmethod(answer_message)

    def text_calls(self, content: str) -> list[ToolRequest]:
        return _text_requests(fallback.parse_tool_calls(content, self.tool_names))

    def turn_message(self, call: ToolRequest) -> Message | None:
        return None


class NativeProtocol(_Tools):
    """Structured ``tool_calls``; calls a model wrote into its text anyway are salvaged."""

    name = NATIVE

    def __init__(self, specs: Sequence[ToolSpec], native_source: ToolSource) -> None:
        super().__init__(specs, native_source)
        self._schemas = tuple(spec.schema() for spec in specs)

    def prompt(self) -> str | None:
        return None

    def request(
        self,
        messages: Sequence[Message],
        *,
        think: bool | None,
        options: Mapping[str, Any] | None,
        sink: DeltaSink,
        answer: bool,
    ) -> ChatRequest:
        return ChatRequest(messages, self._schemas, think, options, sink)

    def read_turn(self, result: ChatResult) -> Turn:
        stored = assistant_message(result)
        native_calls = result.message.get("tool_calls") or ()
        if native_calls:
            stored["tool_calls"] = [thaw(c) for c in native_calls]
            calls = [native_request(c, self.native_source) for c in native_calls]
            return Turn(stored, calls, thinking=thinking_of(result))
        parsed = fallback.parse_tool_calls(str(stored["content"]), self.tool_names)
        thinking = thinking_of(result) or parsed.thinking or None
        if parsed.calls:
            return Turn(stored, calls=_text_requests(parsed), thinking=thinking)
        # A reply that tried to write a call as text and failed is still the answer here:
        # native tool calls are this protocol's way to call.
        return Turn(stored, answer=parsed.visible_text, thinking=thinking)

    def unanswered_calls(self, history: Sequence[Message]) -> list[ToolRequest]:
        return unanswered_calls(history, self.native_source, self.text_calls)


class TextProtocol(_Tools):
    """Calls written in the reply as the runtime's prompt shows (:mod:`rune.formats.fallback`)."""

    name = TEXT_FALLBACK

    def prompt(self) -> str | None:
        return fallback.fallback_prompt(self.specs)

    def request(
        self,
        messages: Sequence[Message],
        *,
        think: bool | None,
        options: Mapping[str, Any] | None,
        sink: DeltaSink,
        answer: bool,
    ) -> ChatRequest:
        return ChatRequest(messages, None, think, options, sink)

    def read_turn(self, result: ChatResult) -> Turn:
        stored = assistant_message(result)
        parsed = fallback.parse_tool_calls(str(stored["content"]), self.tool_names)
        thinking = thinking_of(result) or parsed.thinking or None
        if parsed.calls:
            return Turn(stored, calls=_text_requests(parsed), thinking=thinking)
        if parsed.error is not None:
            # A reply that tried to call a tool and failed to parse: tell the model how.
            feedback = (
                f"Your tool call could not be used: {parsed.error}. "
                f"{fallback.expected_format_hint()}"
            )
            unusable = Unusable(feedback, "tool call", "<unparsed tool call>" + parsed.error)
            return Turn(stored, unusable=unusable, thinking=thinking)
        return Turn(stored, answer=parsed.visible_text, thinking=thinking)

    def unanswered_calls(self, history: Sequence[Message]) -> list[ToolRequest]:
        return unanswered_calls(history, self.native_source, self.text_calls)


class ConstrainedProtocol(_Tools):
    """One JSON object per turn, constrained by the server's grammar
    (:mod:`rune.formats.constrained`)."""

    name = CONSTRAINED
    withholds_answer = True
    answer_schema = True

    def __init__(self, specs: Sequence[ToolSpec], native_source: ToolSource) -> None:
        super().__init__(specs, native_source)
        self._turn_schema = constrained.turn_schema(specs)
        self._unanswerable_schema = constrained.turn_schema(specs, answer=False)

    def prompt(self) -> str | None:
        return constrained.constrained_prompt(self.specs)

    def request(
        self,
        messages: Sequence[Message],
        *,
        think: bool | None,
        options: Mapping[str, Any] | None,
        sink: DeltaSink,
        answer: bool,
    ) -> ChatRequest:
        schema: Mapping[str, Any] = self._turn_schema if answer else self._unanswerable_schema
        return ChatRequest(messages, None, think, options, constrained.TurnStream(sink), schema)

    def read_turn(self, result: ChatResult) -> Turn:
        stored = assistant_message(result)
        turn = constrained.parse_turn(str(stored["content"]), self.tool_names)
        thinking = thinking_of(result)
        if turn.call is not None:
            return Turn(stored, calls=[_constrained_request(turn.call)], thinking=thinking)
        if turn.answer is not None:
            return Turn(stored, answer=turn.answer, thinking=thinking)
        error = turn.error or "the reply could not be read"
        error += _cut_off(result)
        feedback = f"Your reply could not be used: {error}. {constrained.format_hint()}"
        unusable = Unusable(feedback, "reply", "<unusable reply>" + error)
        return Turn(stored, unusable=unusable, thinking=thinking)

    def turn_message(self, call: ToolRequest) -> Message | None:
        reply = constrained.reply(constrained.ConstrainedCall(call.name, call.arguments))
        return {"role": "assistant", "content": reply}

    def calls_in(self, content: str) -> list[ToolRequest]:
        turn = constrained.parse_turn(content, self.tool_names)
        return [_constrained_request(turn.call)] if turn.call is not None else []

    def unanswered_calls(self, history: Sequence[Message]) -> list[ToolRequest]:
        return unanswered_calls(history, self.native_source, self.calls_in)


class BlocksProtocol(TextProtocol):
    """Code changes as fenced blocks under a file's path, other calls as in the text protocol
    (:mod:`rune.runtime.blocks`); the request is the text protocol's."""

    name = BLOCKS
    #: no grammar keeps an answer out, but one that comes too early is sent back
    #: (``Assist.before_answer``), so the assists that withhold it apply
    withholds_answer = True

    def prompt(self) -> str | None:
        return blocks.blocks_prompt(self.specs)

    def read_turn(self, result: ChatResult) -> Turn:
        stored = assistant_message(result)
        turn = blocks.parse_blocks(str(stored["content"]), self.specs)
        thinking = thinking_of(result)
        if turn.calls:
            return Turn(stored, calls=[_block_request(c) for c in turn.calls], thinking=thinking)
        if turn.error is None:
            return Turn(stored, answer=turn.answer or "", thinking=thinking)
        error = turn.error
        error += _cut_off(result)
        feedback = f"Your reply could not be used: {error}. {blocks.format_hint()}"
        unusable = Unusable(feedback, "reply", "<unusable reply>" + error)
        return Turn(stored, unusable=unusable, thinking=thinking)

    def turn_message(self, call: ToolRequest) -> Message | None:
        reply = blocks.reply(blocks.BlockCall(call.name, dict(call.arguments)))
        return {"role": "assistant", "content": reply}

    def calls_in(self, content: str) -> list[ToolRequest]:
        return [_block_request(c) for c in blocks.parse_blocks(content, self.specs).calls]

    def unanswered_calls(self, history: Sequence[Message]) -> list[ToolRequest]:
        return unanswered_calls(history, self.native_source, self.calls_in)


def standard_protocol(
    name: str, specs: Sequence[ToolSpec], native_source: ToolSource
) -> ToolProtocol:
    """The protocol a loop state names (``LoopState.protocol``)."""
    kinds: dict[str, type[NativeProtocol | TextProtocol | ConstrainedProtocol | BlocksProtocol]] = {
        NATIVE: NativeProtocol,
        TEXT_FALLBACK: TextProtocol,
        CONSTRAINED: ConstrainedProtocol,
        BLOCKS: BlocksProtocol,
    }
    return kinds[name](specs, native_source)


def _cut_off(result: ChatResult) -> str:
    """Why a reply that could not be read stopped early, for the model ("" when it did not)."""
    if result.done_reason != "length":
        return ""
    if any(w.startswith(REPEATED) for w in result.warnings):
        return "; the reply repeated itself and Rune stopped it"
    return "; the reply hit the output token limit"


def _constrained_request(call: constrained.ConstrainedCall) -> ToolRequest:
    return tool_request(call.name, call.arguments, None, "constrained")


def _text_requests(parsed: fallback.ParseOutcome) -> list[ToolRequest]:
    return [tool_request(c.name, c.arguments, None, "text-fallback") for c in parsed.calls]


def _block_request(call: blocks.BlockCall) -> ToolRequest:
    return tool_request(call.name, call.arguments, None, "blocks")
