"""``OpenAICompatTransport``: llama.cpp's llama-server, vLLM, LM Studio — ``/v1/chat/completions``.

Rune's messages are Ollama-shaped; :mod:`rune.transport.openai_wire` translates them to the
OpenAI wire format on the way out and assembles the SSE answer back into one Ollama-shaped turn.

Capability discovery, one cached pass per model: llama-server's ``GET /props``
(``chat_template_caps.supports_tools``, the configured ``n_ctx``) and ``GET /v1/models``
(llama-server's ``meta.n_ctx_train``, vLLM's ``max_model_len``). Constructor overrides win.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import httpx

from rune.errors import ContextOverflow, ServerError, ToolsUnsupported
from rune.messages import ChatResult, ToolSource, thaw
from rune.transport.base import Capabilities, DeltaSink
from rune.transport.http import (
    HttpTransport,
    capped_body,
    capped_lines,
    make_client,
    positive_int,
    raise_for_status,
    translate_error,
)
from rune.transport.openai_wire import (
    SERVER,
    TurnAssembly,
    decode_json,
    sse_data,
    to_openai_messages,
)

CHAT_PATH = "/chat/completions"
#: ``response_format.json_schema.name``: OpenAI requires one; llama-server and vLLM ignore it
SCHEMA_NAME = "rune_turn"
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
    # token id → bias; llama-server also takes [[id, false], ...]: never sampled
    "logit_bias": "logit_bias",
    # llama-server: False makes it evaluate the whole prompt afresh instead of reusing the
    # cached prefix (a fresh server's numerics, so greedy decoding repeats exactly)
    "cache_prompt": "cache_prompt",
}


class OpenAICompatTransport(HttpTransport):
    """A model server that speaks OpenAI's ``/v1/chat/completions``.

    ``base_url`` may name the server root (``http://127.0.0.1:8080``) or its ``/v1`` prefix.
    ``context_length`` and ``tools`` override what discovery finds (for servers that say
    nothing).

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
    ) -> None:
        super().__init__()
        self.root, self.api_prefix = split_base_url(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._has_key = bool(api_key)
        self._client = make_client(
            self.root,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            headers=headers,
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
        response_schema: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        body = self._request_body(model, messages, tools, think, options)
        if response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": SCHEMA_NAME,
                    "strict": True,
                    "schema": thaw(response_schema),
                },
            }
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
                for payload in sse_data(capped_lines(response, server=SERVER)):
                    assembly.feed_chunk(decode_json(payload, "stream event"))
            else:
                body_text = capped_body(response, server=SERVER)
                assembly.feed_body(decode_json(body_text, "response"))
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

    def _raise_for_status(self, response: httpx.Response, model: str) -> None:
        try:
            raise_for_status(response, model=model, server=SERVER, not_found_hint=self._hint_404())
        except ServerError as err:
            if err.status_code not in (401, 403):
                raise
            raise ServerError(f"{err} — {self._key_hint()}", status_code=err.status_code) from None

    def _key_hint(self) -> str:
        """How to give the server a key (an HTTP 401 or 403 says little more than no)."""
        if self._has_key:
            return (
                "the server refused the API key Rune sent; check the one given by --api-key, "
                "RUNE_API_KEY or `api_key` in config.toml (`rune config` shows which is used)"
            )
        return (
            "the server wants an API key: pass --api-key KEY, set RUNE_API_KEY, or put "
            'api_key = "KEY" in config.toml (`rune config` shows where it is)'
        )

    def _check_chat_status(self, response: httpx.Response, model: str, *, tools_sent: bool) -> None:
        try:
            self._raise_for_status(response, model)
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
        self._raise_for_status(response, model)
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
                "start llama-server (or vLLM, LM Studio) there, or check the address "
                f"(--backend URL, or backend in config.toml; now {self.root}{self.api_prefix})"
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
    meta = entry.get("meta")
    meta = meta if isinstance(meta, Mapping) else {}
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
