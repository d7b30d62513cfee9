"""The HTTP plumbing both wire-format transports share: the client, the capability cache,
and error translation.

This is the one place where httpx exceptions and HTTP error statuses become Rune's
:class:`rune.errors.TransportError` subclasses, so every transport reports the same failure
the same way.
"""

from __future__ import annotations

import codecs
import ipaddress
import json
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, Self

import httpx

from rune.errors import (
    ModelNotFound,
    ProtocolError,
    ServerError,
    ServerUnreachable,
    ToolsUnsupported,
    TransportError,
    TransportTimeout,
)
from rune.limits import MAX_STREAM_BYTES
from rune.transport.base import Capabilities

#: how much of a server's error body goes into a message shown to the user
MAX_ERROR_CHARS = 500
#: how a user of the ``rune`` command changes the read timeout (``read_timeout=`` in Python)
TIMEOUT_HINT = "rune --timeout SECONDS, RUNE_TIMEOUT, or `timeout = SECONDS` in config.toml"


class HttpTransport:
    """What every HTTP transport shares: one httpx client, closed with the transport, and
    capability discovery done once per model for the transport's life."""

    _client: httpx.Client

    def __init__(self) -> None:
        self._capabilities: dict[str, Capabilities] = {}

    def _discover(self, model: str) -> Capabilities:
        raise NotImplementedError

    def capabilities(self, model: str) -> Capabilities:
        cached = self._capabilities.get(model)
        if cached is None:
            cached = self._capabilities[model] = self._discover(model)
        return cached

    def supports_tools(self, model: str) -> bool:
        return self.capabilities(model).tools

    def supports_thinking(self, model: str) -> bool:
        return self.capabilities(model).thinking

    def _forget_tools(self, model: str) -> None:
        """The server refused tools at chat time: it knows better than discovery did."""
        known = self._capabilities.get(model) or Capabilities(tools=False)
        self._capabilities[model] = replace(known, tools=False)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def capped_lines(
    response: httpx.Response, *, server: str, limit: int | None = None
) -> Iterator[str]:
    """The lines of a streamed answer, like ``iter_lines`` (a trailing ``\r`` dropped), but
    never more than ``limit`` bytes (:data:`rune.limits.MAX_STREAM_BYTES`) of it: a server that
    streams without end, or one endless line, is a ProtocolError, not all of memory."""
    limit = MAX_STREAM_BYTES if limit is None else limit
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    total = 0
    partial: list[str] = []
    for data in response.iter_bytes():
        total += len(data)
        if total > limit:
            raise ProtocolError(
                f"{server}'s answer is over {limit // (1024 * 1024)} MiB; Rune stopped reading it"
            )
        text = decoder.decode(data)
        if "\n" not in text:
            partial.append(text)
            continue
        lines = text.split("\n")
        partial.append(lines[0])
        lines[0] = "".join(partial)
        partial = [lines.pop()]
        for line in lines:
            yield line.removesuffix("\r")
    rest = "".join(partial) + decoder.decode(b"", final=True)
    if rest:
        yield rest.removesuffix("\r")


def capped_body(response: httpx.Response, *, server: str, limit: int | None = None) -> str:
    """A whole (non-streamed) answer as text, refusing more than ``limit`` bytes."""
    return "\n".join(capped_lines(response, server=server, limit=limit))


def positive_int(value: Any) -> int | None:
    """A count a server reported, or None when it is missing, not a number, or not > 0."""
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def decode_object(text: str, *, what: str) -> dict[str, Any]:
    """One JSON object from a server's answer; anything else is a ProtocolError naming ``what``
    (e.g. "Ollama's /api/show answer")."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ProtocolError(f"{what} is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not a JSON object: {text[:200]!r}")
    return value


def make_client(
    base_url: str,
    *,
    connect_timeout: float,
    read_timeout: float,
    headers: Mapping[str, str] | None = None,
) -> httpx.Client:
    """An httpx client for one model server, with explicit timeouts.

    ``read_timeout`` bounds the silence between two received chunks, not the whole answer, so a
    long generation that keeps streaming never times out while a stalled server always does.
    """
    timeout = httpx.Timeout(
        connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
    )
    return httpx.Client(
        base_url=base_url,
        timeout=timeout,
        headers=dict(headers or {}),
        verify=True if httpx.URL(base_url).scheme == "https" else _no_tls_context(),
        # An HTTP(S)_PROXY meant for the internet must not capture calls to a local server.
        trust_env=not is_loopback(base_url),
    )


def _no_tls_context() -> ssl.SSLContext:
    """The TLS context of a plain-http client: it never uses TLS (redirects are not followed),
    so it skips loading the CA bundle (~0.1 s per client); holding no CA, it fails closed."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def is_loopback(url: str) -> bool:
    """Whether ``url`` points at this machine (localhost or a loopback address)."""
    host = httpx.URL(url).host
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def translate_error(err: httpx.HTTPError, *, server: str, unreachable_hint: str) -> TransportError:
    """The Rune error for an httpx failure talking to ``server`` (e.g. ``"Ollama"``)."""
    where = _origin(err)
    if isinstance(err, httpx.ConnectTimeout):
        return TransportTimeout(
            f"{server} at {where} did not accept a connection within "
            f"{_timeout(err, 'connect')}: {unreachable_hint}"
        )
    if isinstance(err, httpx.ReadTimeout):
        return TransportTimeout(
            f"{server} at {where} sent nothing for {_timeout(err, 'read')} (read timeout); "
            "the model may still be loading or the server is stuck. If it is only slow, allow "
            f"more time: {TIMEOUT_HINT}"
        )
    if isinstance(err, httpx.TimeoutException):
        return TransportTimeout(f"{server} at {where} timed out: {err}")
    if isinstance(err, httpx.ConnectError | httpx.ProxyError):
        return ServerUnreachable(f"no {server} at {where}: {unreachable_hint}")
    if isinstance(err, httpx.UnsupportedProtocol):
        return ServerUnreachable(
            f"cannot reach {server} at {where}: the address must start with http:// or https://"
        )
    if isinstance(err, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return ProtocolError(
            f"connection to {server} at {where} dropped mid-stream ({err or type(err).__name__}); "
            "the server may have crashed or run out of memory — check its log"
        )
    if isinstance(err, httpx.HTTPStatusError):
        status = err.response.status_code
        return ServerError(f"{server} at {where} answered HTTP {status}", status_code=status)
    return ProtocolError(f"talking to {server} at {where} failed: {type(err).__name__}: {err}")


def raise_for_status(
    response: httpx.Response, *, model: str, server: str, not_found_hint: str
) -> None:
    """Raise the Rune error for a non-2xx ``response``; return quietly on success.

    Works on a streamed response too: the error body is read first. httpx errors raised while
    reading it propagate for the caller's :func:`translate_error`.
    """
    if response.is_success:
        return
    response.read()
    status = response.status_code
    message = error_message_of(response.text) or response.reason_phrase or "no details"
    if status == 404 and "model" in message.lower():
        raise ModelNotFound(f"{server} has no model {model!r} ({message}): {not_found_hint}")
    if status == 400 and "does not support tools" in message:
        raise ToolsUnsupported(f"{server}: model {model!r} does not support tools ({message})")
    if status == 404:
        # Not a model: the route itself is missing, so this is some other server.
        where = _origin_of(response.request.url)
        message += f" — is {where} really {server}?"
    raise ServerError(f"{server} answered HTTP {status}: {message}", status_code=status)


def error_message_of(body: str | Mapping[str, Any]) -> str | None:
    """The error text in a server's body, whichever way the server spells it.

    Handles Ollama's ``{"error": "..."}``, OpenAI's and llama.cpp's
    ``{"error": {"message": "..."}}``, vLLM's ``{"message": "..."}`` and plain text. Returns
    ``None`` for an empty body or a JSON object that carries no error.
    """
    payload: Any = body
    if isinstance(body, str):
        text = body.strip()
        if not text:
            return None
        try:
            payload = json.loads(text)
        except ValueError:
            return _clip(text)
        if not isinstance(payload, Mapping):
            return _clip(text)
    error = payload.get("error")
    if isinstance(error, Mapping):
        error = error.get("message") or json.dumps(error, ensure_ascii=False)
    if error is None and payload.get("object") == "error":
        error = payload.get("message")
    if error is None or error == "":
        return None
    return _clip(str(error))


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"


def _origin(err: httpx.HTTPError) -> str:
    try:
        url = err.request.url
    except RuntimeError:  # an error raised without a request attached
        return "the configured address"
    return _origin_of(url)


def _origin_of(url: httpx.URL) -> str:
    port = f":{url.port}" if url.port is not None else ""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}{port}"


def _timeout(err: httpx.HTTPError, which: str) -> str:
    try:
        seconds = err.request.extensions.get("timeout", {}).get(which)
    except RuntimeError:
        seconds = None
    return "the allowed time" if seconds is None else f"{seconds:g} s"
