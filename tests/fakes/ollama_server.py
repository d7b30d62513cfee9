"""A fake Ollama: a real HTTP server on 127.0.0.1 in a thread, answering like Ollama does.

It serves ``/api/chat`` (streamed NDJSON, chunked, one object per line, exactly the shapes
``docs/wire.md`` records), ``/api/show`` and ``/api/tags``, and records every request body so a
test can pin the JSON the client sent. Before a scripted reply is used, ``/api/chat`` makes the
checks the real server makes: unknown model → 404, ``tools`` to a model without the ``tools``
capability → 400 "... does not support tools", ``think`` to a non-thinking model → 400.

Use it as a context manager, typically from a fixture in the test module::

    @pytest.fixture
    def ollama() -> Iterator[FakeOllama]:
        with FakeOllama() as server:
            yield server

    def test_x(ollama):
        ollama.script(text_reply("hello"))
        transport = OllamaChatTransport(ollama.url)

A scripted reply is a :class:`Reply` (see :func:`text_reply`, :func:`tool_reply`,
:func:`error_reply`, :func:`reply`) or a callable taking the request body and returning one,
for a fake that answers from what it was sent.
"""

from __future__ import annotations

import json
import random
import socketserver
import string
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Line = Mapping[str, Any] | str


@dataclass
class FakeModel:
    """One pulled model as ``/api/show`` and ``/api/tags`` describe it."""

    name: str
    #: None leaves the field out, as Ollama before 0.6.4 did
    capabilities: tuple[str, ...] | None = ("completion", "tools")
    architecture: str = "qwen3"
    context_length: int | None = 40960
    #: Modelfile parameters, one ``key value`` per line, as ``/api/show`` prints them
    parameters: str = ""
    template: str = "{{- range .Messages }}{{ .Content }}{{ end }}"
    #: replaces the generated ``model_info`` when given
    model_info: Mapping[str, Any] | None = None

    def can(self, capability: str) -> bool:
        return capability in (self.capabilities or ())


@dataclass
class Reply:
    """One scripted answer to ``/api/chat``.

    ``lines`` go out as NDJSON, one chunk each (a ``str`` line is sent raw, for malformed
    output); ``body`` instead sends one JSON document with ``status`` (for error answers).
    ``stall`` waits that many seconds before sending anything and ``interval`` between two
    lines; ``cut`` drops the connection after the lines without ending the chunked body, as a
    crashing server does.
    """

    lines: Sequence[Line] = ()
    status: int = 200
    body: Mapping[str, Any] | str | None = None
    stall: float = 0.0
    interval: float = 0.0
    cut: bool = False


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    body: Any


ReplySource = Reply | Callable[[Mapping[str, Any]], Reply]


# --- building replies ---------------------------------------------------------------------


def call_id() -> str:
    """An id as Ollama makes them (v0.12.10+): ``call_`` and 8 of [a-z0-9]."""
    return "call_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


def tool_call(
    name: str, arguments: Mapping[str, Any], *, index: int = 0, id: str | None = None
) -> dict[str, Any]:
    """One entry of ``message.tool_calls`` as Ollama streams it (no ``type`` field)."""
    return {
        "id": id or call_id(),
        "function": {"index": index, "name": name, "arguments": dict(arguments)},
    }


def chunk(
    content: str = "",
    *,
    thinking: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``done:false`` chunk; the server adds ``model`` and ``created_at`` when sending."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls:
        message["tool_calls"] = [dict(c) for c in tool_calls]
    return {"message": message, "done": False}


def final(
    content: str = "",
    *,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    done_reason: str = "stop",
    prompt_eval_count: int | None = None,
    eval_count: int = 12,
) -> dict[str, Any]:
    """The ``done:true`` chunk with its metrics (durations in ns). Without
    ``prompt_eval_count`` the server fills in its own count of the prompt it was sent."""
    line = chunk(content, tool_calls=tool_calls)
    line.update(
        done=True,
        done_reason=done_reason,
        total_duration=812_000_000,
        load_duration=21_000_000,
        prompt_eval_duration=301_000_000,
        eval_count=eval_count,
        eval_duration=480_000_000,
    )
    if prompt_eval_count is not None:
        line["prompt_eval_count"] = prompt_eval_count
    return line


def reply(*lines: Line, stall: float = 0.0, interval: float = 0.0, cut: bool = False) -> Reply:
    return Reply(lines=lines, stall=stall, interval=interval, cut=cut)


def text_reply(
    text: str, *, thinking: str | None = None, prompt_eval_count: int | None = None
) -> Reply:
    """A plain answer streamed a few characters at a time, after optional thinking."""
    lines: list[Line] = []
    if thinking:
        lines += [chunk(thinking=piece) for piece in _pieces(thinking)]
    lines += [chunk(piece) for piece in _pieces(text)]
    lines.append(final(prompt_eval_count=prompt_eval_count))
    return Reply(lines=lines)


def tool_reply(
    *calls: Mapping[str, Any], thinking: str | None = None, on_final: bool = False
) -> Reply:
    """Tool calls, after optional streamed thinking: on a ``done:false`` chunk followed by an
    empty final chunk (as Ollama's own docs/api.md shows), or on the final chunk itself
    (``on_final``)."""
    lines: list[Line] = [chunk(thinking=piece) for piece in _pieces(thinking or "")]
    if on_final:
        lines.append(final(tool_calls=calls))
    else:
        lines += [chunk(tool_calls=calls), final()]
    return Reply(lines=lines)


def error_reply(status: int, message: str) -> Reply:
    """An error answered before any byte of the stream: a real status, ``{"error": ...}``."""
    return Reply(status=status, body={"error": message})


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# --- the server ---------------------------------------------------------------------------


def full_name(model: str) -> str:
    return model if ":" in model else f"{model}:latest"


class FakeOllama:
    """The server. ``url`` is its base URL; ``requests`` everything it was sent."""

    def __init__(self, models: Sequence[FakeModel] | None = None) -> None:
        default = [
            FakeModel("qwen3:latest", ("completion", "tools", "thinking")),
            FakeModel("gemma3:latest", ("completion", "vision"), architecture="gemma3"),
        ]
        self.models: dict[str, FakeModel] = {}
        for model in default if models is None else models:
            self.add_model(model)
        self.requests: list[Recorded] = []
        self._replies: list[ReplySource] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add_model(self, model: FakeModel) -> None:
        self.models[full_name(model.name)] = model

    def script(self, *replies: ReplySource) -> None:
        """Queue answers for the next ``/api/chat`` calls, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def unused_replies(self) -> int:
        return len(self._replies)

    def bodies(self, path: str = "/api/chat") -> list[Any]:
        return [r.body for r in self.requests if r.path == path]

    def count(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    def start(self) -> FakeOllama:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- behaviour, called from the handler thread --------------------------------------

    def _next_reply(self, body: Mapping[str, Any]) -> Reply:
        with self._lock:
            source = self._replies.pop(0) if self._replies else None
        if source is None:
            return error_reply(500, "fake Ollama: no scripted reply left")
        return source(body) if callable(source) else source

    def _chat(self, body: Mapping[str, Any]) -> Reply:
        name = body.get("model")
        if not name:
            return error_reply(400, "model is required")
        model = self.models.get(full_name(str(name)))
        if model is None:
            return error_reply(404, f'model "{name}" not found, try pulling it first')
        if body.get("tools") and not model.can("tools"):
            return error_reply(
                400, f"registry.ollama.ai/library/{full_name(model.name)} does not support tools"
            )
        if body.get("think") not in (None, False) and not model.can("thinking"):
            return error_reply(400, f'"{name}" does not support thinking')
        return self._next_reply(body)

    def _show(self, body: Mapping[str, Any]) -> tuple[int, Any]:
        name = str(body.get("model") or body.get("name") or "")
        model = self.models.get(full_name(name))
        if model is None:
            return 404, {"error": f"model '{name}' not found"}
        info: dict[str, Any] = {"general.architecture": model.architecture}
        if model.context_length is not None:
            info[f"{model.architecture}.context_length"] = model.context_length
        info[f"{model.architecture}.embedding_length"] = 4096
        show = {
            "license": "",
            "modelfile": f"FROM {model.name}\n",
            "parameters": model.parameters,
            "template": model.template,
            "details": _details(model),
            "model_info": info if model.model_info is None else dict(model.model_info),
            "modified_at": "2026-08-01T10:00:00.000000000Z",
        }
        if model.capabilities is not None:
            show["capabilities"] = list(model.capabilities)
        return 200, show

    def _tags(self) -> dict[str, Any]:
        return {
            "models": [
                {
                    "name": name,
                    "model": name,
                    "modified_at": "2026-08-01T10:00:00.000000000Z",
                    "size": 5_200_000_000,
                    "digest": "0" * 64,
                    "details": _details(model),
                }
                for name, model in self.models.items()
            ]
        }


def _details(model: FakeModel) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": model.architecture,
        "families": [model.architecture],
        "parameter_size": "8.2B",
        "quantization_level": "Q4_K_M",
    }


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The fake's stand-in for a tokenizer: about 3.5 characters a token plus template tokens."""
    messages = body.get("messages") or []
    text = sum(len(json.dumps(m.get("content", ""))) for m in messages if isinstance(m, dict))
    return int(text / 3.5) + 8 * len(messages) + 3


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host name up (getfqdn), which can take seconds.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that stops reading after an error line or a timeout is expected here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOllama/0.1"

    @property
    def fake(self) -> FakeOllama:
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest shows failures, not access logs."""

    def do_GET(self) -> None:
        self.fake.requests.append(Recorded("GET", self.path, None))
        if self.path == "/api/tags":
            self._send_json(200, self.fake._tags())
        elif self.path in ("/", "/api/version"):
            self._send_json(200, {"version": "0.33.0"})
        else:
            self._send_text(404, "404 page not found")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            self.fake.requests.append(Recorded("POST", self.path, raw))
            self._send_json(400, {"error": "invalid character in request body"})
            return
        self.fake.requests.append(Recorded("POST", self.path, body))
        if self.path == "/api/chat":
            self._send_reply(self.fake._chat(body), body)
        elif self.path == "/api/show":
            self._send_json(*self.fake._show(body))
        else:
            self._send_text(404, "404 page not found")

    def _send_reply(self, answer: Reply, request: Mapping[str, Any]) -> None:
        if answer.stall and self.fake._stopping.wait(answer.stall):
            return
        if answer.body is not None:
            self._send_json(answer.status, answer.body)
            return
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for number, line in enumerate(answer.lines):
            if number and answer.interval and self.fake._stopping.wait(answer.interval):
                return
            self._send_chunk(_render(line, request))
        if answer.cut:
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_chunk(self, text: str) -> None:
        data = (text + "\n").encode("utf-8")
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_json(self, status: int, payload: Any) -> None:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
        self._send(status, data, "application/json; charset=utf-8")

    def _send_text(self, status: int, text: str) -> None:
        self._send(status, text.encode("utf-8"), "text/plain; charset=utf-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _render(line: Line, request: Mapping[str, Any]) -> str:
    """A chat chunk with the fields Ollama puts on every chunk, in Ollama's order."""
    if isinstance(line, str):
        return line
    if "done" not in line:
        return json.dumps(line)
    rendered: dict[str, Any] = {
        "model": request.get("model"),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        **line,
    }
    if rendered["done"] and "prompt_eval_count" not in rendered:
        rendered["prompt_eval_count"] = prompt_tokens(request)
    return json.dumps(rendered, ensure_ascii=False)
