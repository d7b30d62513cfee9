"""``OpenAICompatTransport``: llama.cpp's llama-server, vLLM, LM Studio — ``/v1/chat/completions``.

Rune's messages are Ollama-shaped; this module translates them to the OpenAI wire format on
the way out (tool-call ``arguments`` as a JSON string, ``type: function``, results as
``{"role": "tool", "tool_call_id": ...}``) and back on the way in (SSE deltas assembled into
one Ollama-shaped assistant turn, tool-call ``arguments`` decoded to a dict).

Capability discovery, one cached pass per model: llama-server's ``GET /props``
(``chat_template_caps.supports_tools``, the configured ``n_ctx``) and ``GET /v1/models``
(llama-server's ``meta.n_ctx_train``, vLLM's ``max_model_len``). Constructor overrides win.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from rune.errors import ContextOverflow, ProtocolError, ServerError, ToolsUnsupported
from rune.events import TextDelta, ThinkingDelta
from rune.messages import ChatResult, ToolSource, Usage
from rune.transport.base import Capabilities, DeltaSink
from rune.transport.http import (
    HttpTransport,
    error_message_of,
    make_client,
    positive_int,
    raise_for_status,
    translate_error,
)

SERVER = "OpenAI-compatible server"
CHAT_PATH = "/chat/completions"
#: Markers of a server refusing the ``tools`` parameter itself (vLLM without a tool parser,
#: llama-server without ``--jinja``); such a model is switched to the text fallback.
TOOLS_REFUSED = ("does not support tools", "enable-auto-tool-choice", "--jinja")
CONTEXT_EXCEEDED = ("exceeds the available context size", "maximum context length")
#: Ollama-style option names Rune uses → the OpenAI request field. ``num_ctx`` is absent on
#: purpose: an OpenAI-compatible server's window is fixed when it starts.
OPTION_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "max_tokens": "max_tokens",
    "num_predict": "max_tokens",
    "tool_choice": "tool_choice",
}


class OpenAICompatTransport(HttpTransport):
    """A model server that speaks OpenAI's ``/v1/chat/completions``.

    ``base_url`` may name the server root (``http://127.0.0.1:8080``) or its ``/v1`` prefix.
    ``context_length`` and ``tools`` override what discovery finds (for servers that say
    nothing). ``transport`` replaces httpx's network layer (tests, the embedded server).

    ``options`` passed to :meth:`chat` use Rune's Ollama-style names (see ``OPTION_FIELDS``);
    ``tool_choice`` is passed through, so a caller can force a structured call, and
    ``stream: False`` asks for one JSON answer instead of SSE (for servers whose streaming of
    tool calls is broken); either way the text reaches ``on_delta``.
    """

    native_source: ToolSource = "openai-native"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 300.0,
        context_length: int | None = None,
        tools: bool | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__()
        self.root, self.api_prefix = split_base_url(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._client = make_client(
            self.root,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            headers=headers,
            transport=transport,
        )
        self._context_override = context_length
        self._tools_override = tools
        self._is_llama_server = False

    # --- capability discovery -----------------------------------------------------------

    def _discover(self, model: str) -> Capabilities:
        """What the server tells about ``model``; :meth:`capabilities` caches it."""
        with self._translated():
            props = self._get_optional("/props", model)
            listing = self._get_optional(self.api_prefix + "/models", model)
        self._is_llama_server = self._is_llama_server or props is not None
        caps = discover(props, find_model(listing, model))
        if self._tools_override is not None:
            caps = replace(caps, tools=self._tools_override)
        if self._context_override is not None:
            caps = replace(caps, context_length=self._context_override)
        return caps

    def context_length(self, model: str) -> int | None:
        """The window to budget for: the override, else the server's configured ``n_ctx``
        (fixed when the server started; a request cannot change it), else the trained size."""
        caps = self.capabilities(model)
        if self._context_override is not None:
            return self._context_override
        return caps.num_ctx or caps.context_length

    def list_models(self) -> list[str]:
        with self._translated():
            listing = self._get_optional(self.api_prefix + "/models", "")
        entries = (listing or {}).get("data") or []
        return [str(e["id"]) for e in entries if isinstance(e, Mapping) and "id" in e]

    def describe(self) -> str:
        kind = " (llama.cpp server)" if self._is_llama_server else ""
        return f"{SERVER} at {self.root}{self.api_prefix}{kind}"

    # --- chat ---------------------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        on_delta: DeltaSink | None = None,
    ) -> ChatResult:
        body = self._request_body(model, messages, tools, think, options)
        assembly = TurnAssembly(on_delta)
        # llama-server closes the connection after every streamed answer while still
        # advertising keep-alive; a pooled connection then fails the next request at
        # random ("Server disconnected without sending a response"). Never reuse it.
        request = self._client.stream(
            "POST", self.api_prefix + CHAT_PATH, json=body, headers={"Connection": "close"}
        )
        with self._translated(), request as response:
            self._check_chat_status(response, model, tools_sent=bool(tools))
            if "text/event-stream" in response.headers.get("content-type", ""):
                for payload in sse_data(response.iter_lines()):
                    assembly.feed_chunk(decode_json(payload, "stream event"))
            else:
                response.read()
                assembly.feed_body(decode_json(response.text, "response"))
        return assembly.result(max_tokens=body.get("max_tokens"))

    def _request_body(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        think: bool | None,
        options: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": to_openai_messages(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = [dict(t) for t in tools]
        if (options or {}).get("stream") is False:
            body["stream"] = False
            del body["stream_options"]
        for key, value in (options or {}).items():
            target = OPTION_FIELDS.get(key)
            # num_predict -1 is Ollama's "no limit"; OpenAI spells that by leaving it out.
            if target is None or (target == "max_tokens" and _is_number(value) and value < 0):
                continue
            body[target] = value
        if think is not None and self.supports_thinking(model):
            # llama-server and vLLM pass these to the chat template (Qwen3-style switch).
            body["chat_template_kwargs"] = {"enable_thinking": bool(think)}
        return body

    def _check_chat_status(self, response: httpx.Response, model: str, *, tools_sent: bool) -> None:
        try:
            raise_for_status(response, model=model, server=SERVER, not_found_hint=self._hint_404())
        except ServerError as err:
            message = str(err)
            if err.status_code == 400 and any(m in message for m in CONTEXT_EXCEEDED):
                raise ContextOverflow(message) from None
            if tools_sent and err.status_code == 400 and any(m in message for m in TOOLS_REFUSED):
                self._forget_tools(model)
                raise ToolsUnsupported(
                    f"{message} — Rune switches {model!r} to the text tool protocol"
                ) from None
            raise
        except ToolsUnsupported:
            self._forget_tools(model)
            raise

    # --- plumbing -----------------------------------------------------------------------

    def _get_optional(self, path: str, model: str) -> dict[str, Any] | None:
        """GET a discovery route; ``None`` when the server does not have it."""
        response = self._client.get(path)
        if response.status_code in (404, 405, 501):
            return None
        raise_for_status(response, model=model, server=SERVER, not_found_hint=self._hint_404())
        try:
            data = response.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _hint_404(self) -> str:
        return f"the server lists the models it serves at {self.root}{self.api_prefix}/models"

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Any httpx failure inside the block becomes the matching Rune error, once."""
        try:
            yield
        except httpx.HTTPError as err:
            hint = (
                "start llama-server (or vLLM, LM Studio) there, or check --base-url "
                f"(now {self.root}{self.api_prefix})"
            )
            raise translate_error(err, server=SERVER, unreachable_hint=hint) from None


def split_base_url(base_url: str) -> tuple[str, str]:
    """``(server root, API prefix)``: ``http://h:8080/v1`` → ``("http://h:8080", "/v1")``."""
    root = base_url.strip().rstrip("/")
    if root.endswith("/v1"):
        return root[: -len("/v1")], "/v1"
    return root, "/v1"


# --- capability discovery -----------------------------------------------------------------


def find_model(listing: Mapping[str, Any] | None, model: str) -> Mapping[str, Any] | None:
    """The ``/v1/models`` entry for ``model``; a server listing one model serves it under
    any name (llama-server), so that one is it."""
    entries = [e for e in (listing or {}).get("data") or [] if isinstance(e, Mapping)]
    for entry in entries:
        if entry.get("id") == model or model in (entry.get("aliases") or ()):
            return entry
    return entries[0] if len(entries) == 1 else None


def discover(props: Mapping[str, Any] | None, entry: Mapping[str, Any] | None) -> Capabilities:
    """Capabilities from llama-server's ``/props`` and a ``/v1/models`` entry (either absent).

    A server that says nothing about tools is assumed to take them: the OpenAI API has the
    parameter, and a 400 refusing it switches the model to the text fallback.
    """
    props = props or {}
    entry = entry or {}
    meta = entry.get("meta") if isinstance(entry.get("meta"), Mapping) else {}
    template_caps = props.get("chat_template_caps")
    tools = True
    if isinstance(template_caps, Mapping) and "supports_tools" in template_caps:
        tools = bool(template_caps["supports_tools"])
    settings = props.get("default_generation_settings")
    num_ctx = positive_int(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    num_ctx = num_ctx or positive_int(props.get("n_ctx")) or positive_int(meta.get("n_ctx"))
    context_length = positive_int(meta.get("n_ctx_train")) or positive_int(
        entry.get("max_model_len")
    )
    thinking = "enable_thinking" in str(props.get("chat_template") or "")
    return Capabilities(
        tools=tools, thinking=thinking, context_length=context_length or num_ctx, num_ctx=num_ctx
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
            call_id = message.get("tool_call_id") or _pair(open_calls, message.get("tool_name"))
            open_calls[:] = [c for c in open_calls if c[0] != call_id]
            result: dict[str, Any] = {"role": "tool", "content": text}
            if call_id:
                result["tool_call_id"] = str(call_id)
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
    try:
        value = json.loads(text)
    except ValueError:
        raise ProtocolError(f"{SERVER} sent a {what} that is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{SERVER} sent a {what} that is not a JSON object: {text[:200]!r}")
    return value


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
            self.thinking.append(reasoning)
            if self.on_delta is not None:
                self.on_delta(ThinkingDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
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
        text = parts.arguments
        try:
            decoded = json.loads(text) if text.strip() else {}
        except ValueError:
            decoded = None
        # Undecodable text is kept as is: the runtime reports it to the model verbatim.
        arguments = decoded if isinstance(decoded, dict) else text
    call: dict[str, Any] = {
        "function": {"index": parts.index, "name": parts.name, "arguments": arguments}
    }
    if parts.call_id:
        call["id"] = parts.call_id
    return call
