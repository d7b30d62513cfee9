"""The OpenAI chat-completions wire format, translated to and from Rune's Ollama shape.

Out: tool-call ``arguments`` become a JSON string, calls get ``type: function`` and an id, tool
results carry ``tool_call_id``. In: SSE events (or one JSON body) are assembled into one
Ollama-shaped assistant turn, tool-call deltas joined by index, ``arguments`` decoded to a dict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rune.calls import decode_arguments
from rune.errors import ProtocolError, ServerError
from rune.events import TextDelta, ThinkingDelta
from rune.limits import ReplyMeter
from rune.messages import ChatResult, Usage
from rune.transport.base import DeltaSink
from rune.transport.http import decode_object, error_message_of

SERVER = "OpenAI-compatible server"


# --- messages out: Ollama shape → OpenAI shape --------------------------------------------


def to_openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Translate a conversation. Calls without an id get one, and results without a
    ``tool_call_id`` are paired with the open calls in order (by ``tool_name`` first).

    ``thinking`` is not sent back: the OpenAI API has no field for it in requests, and some
    servers reject ``reasoning_content`` there.
    """
    out: list[dict[str, Any]] = []
    open_calls: list[tuple[str, str]] = []  # (id, name) of calls still waiting for a result
    for position, message in enumerate(messages):
        role = str(message.get("role") or "user")
        content = message.get("content")
        text = "" if content is None else str(content)
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for n, call in enumerate(message["tool_calls"]):
                function = call.get("function") or {}
                call_id = str(call.get("id") or f"call_{position}_{n}")
                name = str(function.get("name") or "")
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": _arguments_text(function)},
                    }
                )
                open_calls.append((call_id, name))
            out.append({"role": "assistant", "content": text, "tool_calls": calls})
        elif role == "tool":
            answered = message.get("tool_call_id") or _pair(open_calls, message.get("tool_name"))
            open_calls[:] = [c for c in open_calls if c[0] != answered]
            result: dict[str, Any] = {"role": "tool", "content": text}
            if answered:
                result["tool_call_id"] = str(answered)
            out.append(result)
        else:
            out.append({"role": role, "content": text})
    return out


def _arguments_text(function: Mapping[str, Any]) -> str:
    arguments = function.get("arguments")
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _pair(open_calls: Sequence[tuple[str, str]], tool_name: Any) -> str | None:
    for call_id, name in open_calls:
        if name == tool_name:
            return call_id
    return open_calls[0][0] if open_calls else None


# --- answers in: SSE → one Ollama-shaped turn ---------------------------------------------


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The ``data`` payloads of a server-sent-event stream, up to ``[DONE]``.

    Follows the SSE rules that matter here: an event ends at a blank line, its ``data:``
    lines join with newlines, ``:`` lines are comments and other fields are ignored.
    """
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                payload = "\n".join(data)
                data = []
                if payload.strip() == "[DONE]":
                    return
                yield payload
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        payload = "\n".join(data)
        if payload.strip() != "[DONE]":
            yield payload


def decode_json(text: str, what: str) -> dict[str, Any]:
    return decode_object(text, what=f"the {SERVER}'s {what}")


@dataclass
class _CallParts:
    index: int
    call_id: str | None = None
    name: str = ""
    arguments: str = ""
    whole: Mapping[str, Any] | None = None  # arguments sent as an object instead of text


@dataclass
class TurnAssembly:
    """Accumulates one assistant turn from stream chunks (or a whole non-stream body)."""

    on_delta: DeltaSink | None = None
    content: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, _CallParts] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, Any] = field(default_factory=dict)
    meter: ReplyMeter = field(default_factory=lambda: ReplyMeter(f"the {SERVER}'s reply"))

    def feed_chunk(self, chunk: Mapping[str, Any]) -> None:
        self._check_error(chunk)
        self._take_stats(chunk)
        for choice in chunk.get("choices") or ():
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                self._take_delta(choice.get("delta") or {})
                self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def feed_body(self, body: Mapping[str, Any]) -> None:
        """A non-streamed ``chat.completion``: its message is one big delta."""
        self._check_error(body)
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ProtocolError(f"{SERVER} answered without choices: {str(body)[:200]!r}")
        self._take_stats(body)
        self._take_delta(choices[0].get("message") or {})
        self.finish_reason = choices[0].get("finish_reason") or self.finish_reason

    def result(self, *, max_tokens: int | None = None) -> ChatResult:
        if self.finish_reason is None:
            raise ProtocolError(
                f"the {SERVER} stream ended before the answer was finished (no finish_reason); "
                "the server may have crashed or cut the connection"
            )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.thinking:
            message["thinking"] = "".join(self.thinking)
        if self.calls:
            message["tool_calls"] = [_ollama_call(p) for _, p in sorted(self.calls.items())]
        warnings: tuple[str, ...] = ()
        if self.finish_reason == "length":
            limit = f" of {max_tokens} tokens" if max_tokens else ""
            warnings = (
                f'the model hit the output limit{limit} (finish_reason "length"): '
                "its answer is cut off",
            )
        return ChatResult(
            message=message, done_reason=self.finish_reason, usage=self._usage(), warnings=warnings
        )

    def _check_error(self, chunk: Mapping[str, Any]) -> None:
        # llama-server and OpenAI: {"error": {...}}; vLLM: {"object": "error", "message": ...}
        if "error" not in chunk and chunk.get("object") != "error":
            return
        error = chunk.get("error", chunk)
        status = error.get("code") if isinstance(error, Mapping) else None
        message = error_message_of(chunk) or "no details"
        raise ServerError(
            f"{SERVER} reported an error mid-answer: {message}",
            status_code=status if isinstance(status, int) else None,
        )

    def _take_stats(self, chunk: Mapping[str, Any]) -> None:
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), Mapping):
            self.timings = chunk["timings"]

    def _take_delta(self, delta: Mapping[str, Any]) -> None:
        # vLLM and OpenRouter name it "reasoning"; llama-server and DeepSeek "reasoning_content".
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.meter.add(reasoning)
            self.thinking.append(reasoning)
            if self.on_delta is not None:
                self.on_delta(ThinkingDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.meter.add(content)
            self.content.append(content)
            if self.on_delta is not None:
                self.on_delta(TextDelta(content))
        for piece in delta.get("tool_calls") or ():
            if isinstance(piece, Mapping):
                self._take_call_piece(piece)

    def _take_call_piece(self, piece: Mapping[str, Any]) -> None:
        index = piece.get("index")
        if not isinstance(index, int):
            # No index (non-streamed bodies, some servers): a new id starts a new call.
            known_ids = {p.call_id for p in self.calls.values()}
            fresh = piece.get("id") and piece.get("id") not in known_ids
            index = len(self.calls) if fresh or not self.calls else max(self.calls)
        parts = self.calls.setdefault(index, _CallParts(index))
        if piece.get("id") and parts.call_id is None:
            parts.call_id = str(piece["id"])
        function = piece.get("function") or {}
        if function.get("name") and not parts.name:
            parts.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self.meter.add(arguments)
            parts.arguments += arguments
        elif isinstance(arguments, Mapping):
            parts.whole = arguments

    def _usage(self) -> Usage:
        usage, timings = self.usage, self.timings
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        if cached is None:
            cached = timings.get("cache_n")
        prompt = usage.get("prompt_tokens")
        if prompt is None and "prompt_n" in timings:
            # llama-server without a usage block: prompt_n counts only the uncached tokens.
            prompt = int(timings["prompt_n"]) + int(timings.get("cache_n") or 0)
        completion = usage.get("completion_tokens", timings.get("predicted_n"))
        return Usage(
            prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=cached
        )


def _ollama_call(parts: _CallParts) -> dict[str, Any]:
    arguments: Any = parts.whole
    if arguments is None:
        decoded = decode_arguments(parts.arguments)
        # Text that is not a JSON object is kept as is: the runtime tells the model why.
        arguments = decoded.value if decoded.value is not None else parts.arguments
    call: dict[str, Any] = {
        "function": {"index": parts.index, "name": parts.name, "arguments": arguments}
    }
    if parts.call_id:
        call["id"] = parts.call_id
    return call
