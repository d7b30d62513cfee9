"""``OllamaChatTransport``: Ollama's native ``/api/chat``, spoken exactly.

Rune owns this wire format instead of using the official ``ollama`` client because that
client drops the tool-call ``id``, ``function.index`` and ``tool_call_id`` (see
``docs/wire.md``); a parallel-call loop needs all three.

What one ``chat`` call does:

* capability discovery first, from one cached ``/api/show`` per model: ``tools``,
  ``thinking``, the trained ``<arch>.context_length`` and a ``num_ctx`` set in the Modelfile;
* ``options.num_ctx`` is always sent (see :meth:`OllamaChatTransport.num_ctx`), because the
  server's own default depends on the Ollama version and the GPU and it truncates silently;
* ``think`` goes only to models with the ``thinking`` capability (others answer 400);
* the NDJSON stream is accumulated: thinking, content and tool calls (with their ``id`` and
  ``function.index``) may arrive on any chunk, including the final ``done`` one; text and
  thinking deltas go to ``on_delta`` as they arrive;
* a ``prompt_eval_count`` well below Rune's own estimate of the prompt it sent means Ollama
  dropped part of it; the result says so in ``warnings``.

A 400 "does not support tools" is remembered for the model (``supports_tools`` answers False
from then on, so the next run uses the text-fallback protocol) and raised as
:class:`rune.errors.ToolsUnsupported`: only the runtime owns the fallback prompt, so only it can
retry the turn the right way.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from rune.calls import decode_arguments
from rune.errors import ConfigError, ProtocolError, ServerError, ToolsUnsupported
from rune.events import TextDelta, ThinkingDelta
from rune.limits import ReplyMeter
from rune.messages import ChatResult, Message, ToolSource, Usage, message_chars, thaw, tools_chars
from rune.transport.base import DEFAULT_WINDOW, Capabilities, DeltaSink
from rune.transport.http import (
    HttpTransport,
    capped_lines,
    decode_object,
    error_message_of,
    make_client,
    positive_int,
    raise_for_status,
    translate_error,
)

DEFAULT_PORT = 11434
SERVER = "Ollama"
UNREACHABLE_HINT = "start it with `ollama serve` or set OLLAMA_HOST"

#: the largest window chosen on our own from a model's trained maximum
AUTO_NUM_CTX_CAP = 8192

#: a prompt Rune estimates below this share of num_ctx cannot have been truncated
TRUNCATION_MIN_FILL = 0.5
#: prompt_eval_count below this share of Rune's estimate means Ollama dropped part of it
TRUNCATION_RATIO = 0.6

# The message fields of Ollama's api.Message; anything else is not sent.
_MESSAGE_FIELDS = ("role", "content", "thinking", "images", "tool_calls", "tool_name")


def resolve_host(host: str | None = None) -> str:
    """The base URL of the Ollama server, read the way Ollama's own clients read it.

    ``host`` wins, else ``OLLAMA_HOST``, else ``http://127.0.0.1:11434``. Like Ollama, a value
    without a scheme is http on port 11434, ``http://x`` means port 80 and ``https://x`` port
    443, ``:5000`` means 127.0.0.1:5000, and a path is kept (for a reverse proxy).
    """
    source = "the host argument" if host else "OLLAMA_HOST"
    raw = (host or os.environ.get("OLLAMA_HOST") or "").strip().strip("\"'")
    scheme, has_scheme, rest = raw.partition("://")
    port = DEFAULT_PORT
    if not has_scheme:
        scheme, rest = "http", raw
    elif scheme in ("http", "https"):
        port = 80 if scheme == "http" else 443
    else:
        raise ConfigError(f"{source} {raw!r} must use http:// or https://, not {scheme}://")
    try:
        split = urlsplit(f"{scheme}://{rest}")
        port = split.port or port
    except ValueError as err:
        raise ConfigError(f"{source} {raw!r} is not a valid host[:port]: {err}") from None
    hostname = split.hostname or "127.0.0.1"
    # OLLAMA_HOST=0.0.0.0 is how people make the server listen everywhere; as a destination it
    # means this machine, and the loopback address says so unambiguously.
    hostname = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(hostname, hostname)
    if ":" in hostname:
        hostname = f"[{hostname}]"
    return f"{scheme}://{hostname}:{port}{split.path.rstrip('/')}"


def parse_parameters(text: str) -> dict[str, str]:
    """Modelfile parameters as ``/api/show`` prints them: ``key   value`` per line.

    Repeated keys (``stop``) keep their last value; only single-valued keys are read from it.
    """
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            found[key] = value.strip().strip('"')
    return found


def capabilities_from_show(show: Mapping[str, Any]) -> Capabilities:
    """What an ``/api/show`` answer says the model can do."""
    declared = show.get("capabilities")
    if isinstance(declared, list):
        tools, thinking = "tools" in declared, "thinking" in declared
    else:
        # Ollama before 0.6.4 had no capabilities list; it derived "tools" from the template.
        tools, thinking = ".Tools" in str(show.get("template") or ""), False
    info = show.get("model_info") or {}
    return Capabilities(
        tools=tools,
        thinking=thinking,
        context_length=_context_length(info) if isinstance(info, Mapping) else None,
        num_ctx=positive_int(parse_parameters(str(show.get("parameters") or "")).get("num_ctx")),
    )


def _context_length(model_info: Mapping[str, Any]) -> int | None:
    arch = model_info.get("general.architecture")
    exact = positive_int(model_info.get(f"{arch}.context_length")) if arch else None
    if exact is not None:
        return exact
    # As Ollama's own CLI does when the architecture key is missing or odd.
    for key, value in model_info.items():
        if str(key).endswith(".context_length") and positive_int(value) is not None:
            return positive_int(value)
    return None


def estimate_prompt_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """A tokenizer-free estimate of a chat prompt: about 4 characters per token, plus the
    few tokens each message's role markers cost. Good to tell "about all" from "about half"."""
    chars = sum(message_chars(m) for m in messages) + (tools_chars(tools) if tools else 0)
    return math.ceil(chars / 4) + 4 * len(messages)


def truncation_warning(*, evaluated: int | None, estimate: int, num_ctx: int) -> str | None:
    """The warning for a prompt Ollama silently cut, or None when nothing points to a cut.

    Ollama drops the oldest messages, then the runner keeps about num_ctx/2 tokens, and still
    answers 200 (ollama#3839, #17427): a low ``prompt_eval_count`` is the only signal. A prompt
    well inside the window cannot have been cut, which keeps a cache-only count from a buggy
    server version from raising a false alarm.
    """
    if evaluated is None or estimate < TRUNCATION_MIN_FILL * num_ctx:
        return None
    if evaluated >= TRUNCATION_RATIO * estimate:
        return None
    return (
        f"Ollama read only {evaluated} prompt tokens of the about {estimate} Rune sent "
        f"(num_ctx {num_ctx}): it silently dropped the start of the conversation. "
        "Raise num_ctx or start a shorter conversation."
    )


class OllamaChatTransport(HttpTransport):
    """The :class:`rune.transport.base.Transport` for an Ollama server."""

    native_source: ToolSource = "ollama-native"

    def __init__(
        self,
        host: str | None = None,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 300.0,
        num_ctx: int | None = None,
    ) -> None:
        if num_ctx is not None and (isinstance(num_ctx, bool) or num_ctx <= 0):
            raise ConfigError(f"num_ctx must be a positive number of tokens, got {num_ctx!r}")
        super().__init__()
        self.host = resolve_host(host)
        self._num_ctx = num_ctx
        self._client = make_client(
            self.host,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )

    # --- discovery ----------------------------------------------------------------------

    def _discover(self, model: str) -> Capabilities:
        """One ``/api/show``; :meth:`capabilities` caches it for this transport's life."""
        show = self._request_json("POST", "/api/show", {"model": model}, model=model)
        return capabilities_from_show(show)

    def num_ctx(self, model: str) -> int:
        """The context window sent as ``options.num_ctx`` when the caller gives none.

        In order: the ``num_ctx`` given to this transport; the Modelfile's ``num_ctx`` (the
        model's author chose it); the trained ``context_length`` capped at 8192, because Ollama
        reserves memory for the whole window and a trained maximum of 40k–128k tokens would
        not fit most local GPUs; 4096, the smallest default Ollama has used since 0.6.7.
        """
        if self._num_ctx is not None:
            return self._num_ctx
        caps = self.capabilities(model)
        if caps.num_ctx is not None:
            return caps.num_ctx
        if caps.context_length is not None:
            return min(caps.context_length, AUTO_NUM_CTX_CAP)
        return DEFAULT_WINDOW

    def context_length(self, model: str) -> int | None:
        """The window the model really gets from Rune (:meth:`num_ctx`), not its trained
        maximum (``capabilities(model).context_length``): that is what a request must fit."""
        return self.num_ctx(model)

    def list_models(self) -> list[str]:
        """The names of the models pulled on this server (``/api/tags``)."""
        models = self._request_json("GET", "/api/tags").get("models")
        if not isinstance(models, list):
            raise ProtocolError(f"Ollama's /api/tags answer has no model list: {models!r}")
        return [str(m.get("name") or m.get("model")) for m in models if isinstance(m, Mapping)]

    def describe(self) -> str:
        return f"Ollama at {self.host}"

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
        response_schema: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        body = self.request_body(
            model,
            messages,
            tools=tools,
            think=think,
            options=options,
            response_schema=response_schema,
        )
        try:
            with self._client.stream("POST", "/api/chat", json=body) as response:
                try:
                    raise_for_status(
                        response, model=model, server=SERVER, not_found_hint=_pull_hint(model)
                    )
                except ToolsUnsupported:
                    # The server knows better than /api/show: use the fallback from now on.
                    self._forget_tools(model)
                    raise
                turn = _accumulate(_ndjson(capped_lines(response, server=SERVER)), on_delta)
        except httpx.HTTPError as err:
            raise translate_error(err, server=SERVER, unreachable_hint=UNREACHABLE_HINT) from None
        estimate = estimate_prompt_tokens(body["messages"], body.get("tools"))
        final = turn.final
        evaluated = positive_int(final.get("prompt_eval_count"))
        window = positive_int(body["options"]["num_ctx"]) or self.num_ctx(model)
        warning = truncation_warning(evaluated=evaluated, estimate=estimate, num_ctx=window)
        return ChatResult(
            message=turn.message(),
            done_reason=final.get("done_reason"),
            usage=Usage(
                prompt_tokens=evaluated,
                completion_tokens=positive_int(final.get("eval_count")),
                cached_prompt_tokens=positive_int(final.get("prompt_eval_cached_count")),
                prompt_tokens_sent_estimate=estimate,
            ),
            warnings=(warning,) if warning else (),
        )

    def request_body(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        response_schema: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The exact JSON ``chat`` posts to ``/api/chat``."""
        caps = self.capabilities(model)
        sent_options = dict(thaw(options) if options else {})
        sent_options.setdefault("num_ctx", self.num_ctx(model))
        body: dict[str, Any] = {
            "model": model,
            "messages": [_wire_message(m) for m in messages],
            "stream": True,
            "options": sent_options,
        }
        if tools:
            body["tools"] = [thaw(t) for t in tools]
        if think is not None and caps.thinking:
            body["think"] = think
        if response_schema is not None:
            body["format"] = thaw(response_schema)
        return body

    # --- plumbing -----------------------------------------------------------------------

    def _request_json(
        self, method: str, path: str, payload: Mapping[str, Any] | None = None, *, model: str = ""
    ) -> dict[str, Any]:
        try:
            response = self._client.request(method, path, json=payload)
            raise_for_status(response, model=model, server=SERVER, not_found_hint=_pull_hint(model))
        except httpx.HTTPError as err:
            raise translate_error(err, server=SERVER, unreachable_hint=UNREACHABLE_HINT) from None
        return decode_object(response.text, what=f"Ollama's {path} answer")


def _pull_hint(model: str) -> str:
    return f"try `ollama pull {model}`"


def _wire_message(message: Mapping[str, Any]) -> Message:
    """One message as Ollama's ``api.Message`` takes it."""
    wire: Message = {key: thaw(message[key]) for key in _MESSAGE_FIELDS if key in message}
    wire["content"] = str(message.get("content") or "")
    if message.get("tool_call_id"):
        wire["tool_call_id"] = message["tool_call_id"]
    if wire.get("tool_calls"):
        wire["tool_calls"] = [_wire_call(call) for call in wire["tool_calls"]]
    else:
        wire.pop("tool_calls", None)
    return wire


def _wire_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call as Ollama takes it back: ``arguments`` must be an object, not a string."""
    function = dict(call.get("function") or {})
    decoded = decode_arguments(function.get("arguments"))
    function["arguments"] = decoded.value if decoded.value is not None else {}
    wire: dict[str, Any] = {"function": function}
    if call.get("id"):
        wire["id"] = call["id"]
    return wire


def _ndjson(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.strip():
            continue
        try:
            chunk = json.loads(line)
        except ValueError:
            raise ProtocolError(
                f"Ollama sent a stream line that is not JSON: {line[:200]!r}"
            ) from None
        if not isinstance(chunk, dict):
            raise ProtocolError(f"Ollama sent a stream line that is not an object: {line[:200]!r}")
        if "error" in chunk:
            # Once streaming started the status stays 200; the error comes as the last line.
            message = error_message_of(chunk) or "unknown error"
            raise ServerError(f"Ollama failed mid-answer: {message}")
        yield chunk


class _Turn:
    """The assistant turn being accumulated from the stream."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.thinking: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {}

    def message(self) -> Message:
        message: Message = {"role": "assistant", "content": "".join(self.content)}
        if self.thinking:
            message["thinking"] = "".join(self.thinking)
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


def _accumulate(chunks: Iterator[dict[str, Any]], on_delta: DeltaSink | None) -> _Turn:
    turn = _Turn()
    meter = ReplyMeter("Ollama's reply")
    for chunk in chunks:
        message = chunk.get("message") or {}
        if not isinstance(message, Mapping):
            raise ProtocolError(f"Ollama sent a chunk whose message is not an object: {chunk!r}")
        thinking, content = message.get("thinking"), message.get("content")
        if thinking:
            meter.add(str(thinking))
            turn.thinking.append(str(thinking))
            if on_delta is not None:
                on_delta(ThinkingDelta(str(thinking)))
        if content:
            meter.add(str(content))
            turn.content.append(str(content))
            if on_delta is not None:
                on_delta(TextDelta(str(content)))
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
            raise ProtocolError(f"Ollama sent tool_calls that are not a list of objects: {calls!r}")
        turn.tool_calls.extend(dict(call) for call in calls)
        if chunk.get("done"):
            turn.final = chunk
            return turn
    raise ProtocolError(
        "Ollama's stream ended before its final chunk: the connection dropped mid-answer"
    )
