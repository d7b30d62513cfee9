"""A real HTTP server in a thread that answers like llama.cpp's llama-server.

It speaks the exact wire format measured against llama-server (xllamacpp 2026.10.11549):
``/v1/chat/completions`` streams ``data: {chat.completion.chunk}\\n\\n`` events with chunked
transfer encoding and ends with ``data: [DONE]\\n\\n``; errors are
``{"error": {"code", "message", "type"}}``; ``/props`` and ``/v1/models`` carry the metadata
capability discovery reads. Each test scripts the chat answers in order (:class:`Reply`) and
reads back what Rune sent (``requests``, ``chat_bodies``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a POST /v1/chat/completions.

    ``events`` are SSE events: a mapping is sent as ``data: <json>``, a string verbatim (for
    malformed streams). ``body`` instead answers with one JSON document (non-stream or error).
    ``cut_after`` drops the connection after that many events without ending the chunked
    body; ``stall_after`` goes silent after that many events (0: before the status line).
    """

    events: Sequence[Mapping[str, Any] | str] = ()
    status: int = 200
    body: Mapping[str, Any] | str | None = None
    done: bool = True
    cut_after: int | None = None
    stall_after: int | None = None


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


def chunk(
    delta: Mapping[str, Any] | None = None, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` exactly as llama-server lays it out."""
    return {
        "choices": [{"finish_reason": finish_reason, "index": 0, "delta": dict(delta or {})}],
        "created": 1796000779,
        "id": "chatcmpl-9AlzfyZMw8FRDI4vOe2wt4QW2rOoI1xK",
        "model": MODEL_ID,
        "system_fingerprint": "b0-unknown",
        "object": "chat.completion.chunk",
        **extra,
    }


def usage_chunk(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    """The last event when ``stream_options.include_usage`` is set: no choices, usage, timings."""
    return {
        "choices": [],
        "created": 1796000779,
        "id": "chatcmpl-9AlzfyZMw8FRDI4vOe2wt4QW2rOoI1xK",
        "model": MODEL_ID,
        "system_fingerprint": "b0-unknown",
        "object": "chat.completion.chunk",
        "usage": {
            "completion_tokens": completion,
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
        "timings": {
            "cache_n": cached,
            "prompt_n": prompt - cached,
            "prompt_ms": 257.4,
            "predicted_n": completion,
            "predicted_ms": 64.9,
        },
    }


def role_chunk() -> dict[str, Any]:
    return chunk({"role": "assistant", "content": None})


def text_reply(*pieces: str, finish_reason: str = "stop", usage: bool = True) -> Reply:
    events: list[Mapping[str, Any] | str] = [role_chunk()]
    events += [chunk({"content": p}) for p in pieces]
    events.append(chunk({}, finish_reason))
    if usage:
        events.append(usage_chunk(36, len(pieces), 21))
    return Reply(events)


def tool_call_reply(*calls: tuple[str, str, Mapping[str, Any]]) -> Reply:
    """Structured calls ``(id, name, arguments)``, each streamed in three argument pieces."""
    events: list[Mapping[str, Any] | str] = [role_chunk()]
    for index, (call_id, name, arguments) in enumerate(calls):
        text = json.dumps(arguments)
        cut = [text[: len(text) // 3], text[len(text) // 3 : 2 * len(text) // 3]]
        cut.append(text[2 * len(text) // 3 :])
        head = {"index": index, "id": call_id, "type": "function"}
        events.append(
            chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in cut
        ]
    events.append(chunk({}, "tool_calls"))
    events.append(usage_chunk(204, 31, 0))
    return Reply(events)


def error_body(status: int, message: str, kind: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "type": kind}}


def error_reply(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    return Reply(status=status, body=error_body(status, message, kind))


LLAMA_PROPS: dict[str, Any] = {
    "default_generation_settings": {"params": {}, "n_ctx": 4096},
    "total_slots": 1,
    "model_alias": MODEL_ID,
    "chat_template": "{%- if tools %}...{%- endif %}",
    "chat_template_caps": {
        "supports_parallel_tool_calls": True,
        "supports_system_role": True,
        "supports_tool_calls": True,
        "supports_tools": True,
    },
    "build_info": "b0-unknown",
}

LLAMA_MODELS: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": MODEL_ID,
            "aliases": [MODEL_ID],
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {"n_ctx": 4096, "n_ctx_train": 8192, "n_params": 134515008},
        }
    ],
}

NOT_FOUND = {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}}


@dataclass
class FakeOpenAIServer:
    """Start with ``with FakeOpenAIServer() as server:``; ``server.base_url`` is its address.

    ``props``/``models`` are served at ``/props`` and ``/v1/models`` (``None`` → 404).
    ``linger`` keeps a streamed connection open that long after its last byte and then closes
    it although the headers said keep-alive — what llama-server does.
    """

    props: Mapping[str, Any] | None = field(default_factory=lambda: dict(LLAMA_PROPS))
    models: Mapping[str, Any] | None = field(default_factory=lambda: dict(LLAMA_MODELS))
    linger: float = 0.0
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._release = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def chat_bodies(self) -> list[Any]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()  # wake handlers that were told to stall
        self._httpd.shutdown()
        self._httpd.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (the timeout tests) leaves a broken pipe behind; not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self, body: Any) -> None:
            path = self.path.split("?")[0]
            server.requests.append(Recorded(self.command, path, dict(self.headers), body))

        def do_GET(self) -> None:
            self._record(None)
            path = self.path.split("?")[0]
            document = {"/props": server.props, "/v1/models": server.models}.get(path)
            if path == "/health":
                document = {"status": "ok"}
            if document is None:
                self._send_json(404, NOT_FOUND)
            else:
                self._send_json(200, document)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode()
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            self._record(body)
            if not self.path.split("?")[0].endswith("/v1/chat/completions"):
                self._send_json(404, NOT_FOUND)
                return
            if not server.replies:
                self._send_json(500, error_body(500, "fake server: no reply scripted", "server"))
                return
            self._answer(server.replies.popleft())

        def _send_json(self, status: int, document: Mapping[str, Any] | str) -> None:
            data = (document if isinstance(document, str) else json.dumps(document)).encode()
            self.send_response(status)
            self.send_header("Server", "llama.cpp")
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Keep-Alive", "timeout=5, max=100")
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, reply: Reply) -> None:
            if reply.stall_after == 0:
                server._release.wait(30)
                return
            if reply.body is not None:
                self._send_json(reply.status, reply.body)
                return
            self.send_response(reply.status)
            self.send_header("Server", "llama.cpp")
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Keep-Alive", "timeout=5, max=100")
            self.end_headers()
            for n, event in enumerate(reply.events):
                if n == reply.cut_after:
                    self.wfile.write(b'40\r\ndata: {"choi')  # half a chunk, then gone
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if n == reply.stall_after:
                    server._release.wait(30)
                    return
                text = event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n"
                self._write_chunk(text.encode())
            if reply.done:
                self._write_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            if server.linger:
                time.sleep(server.linger)
                self.close_connection = True

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler
