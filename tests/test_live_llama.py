"""The embedded llama.cpp backend, and the OpenAI-compatible transport against a real
llama.cpp server with a real (tiny) model (the tests marked ``live``).

Assert shapes and invariants only: SmolLM2-135M is a wire-format partner, not a coding agent.
Tool calls are forced the way the shared model-server scripts measured to be reliable: a last
assistant message opening ``<tool_call>``, ``tool_choice: required`` and the closing tag as a stop.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from live.server import EMBEDDED_CTX, LiveServer
from rune import LocalToolRuntime, SandboxPolicy, ToolExecutor
from rune.errors import BackendUnavailable, ConfigError, ContextOverflow, ServerError
from rune.events import TextDelta
from rune.models.embedded import EmbeddedLlamaServer, demo_model_path, load_chat_template
from rune.transport.openai_compat import OpenAICompatTransport

live = pytest.mark.live

MAX_TOKENS = 32
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "File path."}},
            "required": ["path"],
        },
    },
}
# Greedy decoding: the same forced call every run (sampled, the model sometimes rambles on).
FORCE_CALL = {
    "tool_choice": "required",
    "stop": ["</tool_call>"],
    "max_tokens": 64,
    "temperature": 0,
}


@pytest.fixture
def transport(live_server: LiveServer) -> Iterator[OpenAICompatTransport]:
    with OpenAICompatTransport(live_server.base_url, read_timeout=60.0) as client:
        yield client


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def forced_call(transport: OpenAICompatTransport, model: str) -> Any:
    messages = [*ask("Read the file main.py"), {"role": "assistant", "content": "<tool_call>\n"}]
    return transport.chat(model, messages, tools=[READ_TOOL], options=FORCE_CALL)


@live
def test_health_and_capability_discovery(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
) -> None:
    health = httpx.get(f"{live_server.base_url}/health", timeout=10, trust_env=False)
    assert health.status_code == 200
    caps = transport.capabilities(live_server.model)
    window = transport.context_length(live_server.model)
    assert window is not None and window > 0
    assert live_server.model in transport.list_models() or not live_server.embedded
    if live_server.embedded:
        assert caps.tools is True  # the bundled template renders tools
        assert caps.num_ctx == EMBEDDED_CTX == window
        assert caps.context_length is not None and caps.context_length >= EMBEDDED_CTX
        assert "llama.cpp" in transport.describe()


@live
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "one-json-answer"])
def test_chat_returns_one_assembled_turn(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
    stream: bool,
) -> None:
    deltas: list[Any] = []
    result = transport.chat(
        live_server.model,
        ask("Say hello."),
        options={"max_tokens": 16, "stream": stream},
        on_delta=deltas.append,
    )
    text = result.message["content"]
    assert result.message["role"] == "assistant" and text
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == text
    assert result.done_reason in ("stop", "length")
    assert result.usage.completion_tokens is not None and 1 <= result.usage.completion_tokens <= 16
    assert result.usage.prompt_tokens is not None and result.usage.prompt_tokens > 0


@live
def test_forced_tool_call_is_assembled_from_streamed_deltas(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
) -> None:
    result = forced_call(transport, live_server.model)
    assert result.done_reason == "tool_calls"
    calls = result.message["tool_calls"]
    assert len(calls) >= 1
    for index, call in enumerate(calls):
        assert isinstance(call["id"], str) and call["id"]
        assert call["function"]["name"] == "read_file"  # the only tool offered
        assert call["function"]["index"] == index
        assert isinstance(call["function"]["arguments"], dict | str)


@live
def test_a_whole_turn_with_the_tool_result_sent_back(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
) -> None:
    first = forced_call(transport, live_server.model)
    call = first.message["tool_calls"][0]
    history = [
        *ask("Read the file main.py"),
        {"role": "assistant", "content": "", "tool_calls": [dict(call)]},
        {
            "role": "tool",
            "tool_name": "read_file",
            "tool_call_id": call["id"],
            "content": "print('hello')",
        },
    ]
    second = transport.chat(
        live_server.model, history, tools=[READ_TOOL], options={"max_tokens": MAX_TOKENS}
    )
    assert second.message["role"] == "assistant"
    assert second.done_reason in ("stop", "length", "tool_calls")
    assert second.usage.prompt_tokens is not None
    assert second.usage.prompt_tokens > (first.usage.prompt_tokens or 0)


@live
def test_the_runtime_drives_the_real_server_within_its_budget(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
    tmp_path: Path,
) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    executor = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path)
    runtime = LocalToolRuntime(
        transport,
        executor,
        model=live_server.model,
        max_iterations=2,
        options={"max_tokens": MAX_TOKENS, "temperature": 0},
    )
    response = runtime.run(ask("Read calc.py and tell me what add does."))
    # Reading needs no approval, so the run ends one of the ways a run without a change can: an
    # answer, its two iterations spent, or the breaker (a 135M model may repeat a failing call).
    assert not response.paused
    assert response.success or response.error_kind in ("IterationLimit", "CircuitBreaker"), (
        response.error_kind,
        response.error,
    )
    assert 1 <= response.iterations_used <= 2
    assert response.protocol == "native"
    assert all(e.source == "openai-native" for e in response.events)


@live
def test_finish_reason_length_is_reported(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
) -> None:
    result = transport.chat(
        live_server.model, ask("Tell me a long story about a dragon."), options={"max_tokens": 3}
    )
    assert result.done_reason == "length"
    assert result.usage.completion_tokens == 3
    assert any("cut off" in w for w in result.warnings)


@live
def test_a_follow_up_reuses_the_prompt_cache(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
) -> None:
    history = ask("List three colours, one per line.")
    first = transport.chat(live_server.model, history, options={"max_tokens": 16})
    follow_up = [*history, dict(first.message), *ask("And three animals?")]
    second = transport.chat(live_server.model, follow_up, options={"max_tokens": 16})
    if second.usage.cached_prompt_tokens is None and not live_server.embedded:
        pytest.skip("this server does not report cached prompt tokens")
    assert second.usage.cached_prompt_tokens is not None
    assert second.usage.cached_prompt_tokens > 0
    assert second.usage.prompt_tokens is not None
    assert second.usage.cached_prompt_tokens < second.usage.prompt_tokens


@live
def test_the_servers_own_error_answers_are_typed(
    live_server: LiveServer,
    transport: OpenAICompatTransport,
) -> None:
    with pytest.raises(ServerError) as bad_field:
        transport.chat(live_server.model, ask("hi"), options={"max_tokens": "many"})
    assert bad_field.value.status_code == 400 and "max_tokens" in str(bad_field.value)

    lost = OpenAICompatTransport(live_server.base_url + "/no-such-prefix/v1")
    with lost, pytest.raises(ServerError) as not_found:
        lost.chat(live_server.model, ask("hi"), options={"max_tokens": 4})
    assert not_found.value.status_code == 404

    if live_server.embedded:
        with pytest.raises(ContextOverflow, match="context"):
            transport.chat(live_server.model, ask("hi " * (2 * EMBEDDED_CTX)))


@live
def test_own_template_means_fallback_and_ctrl_c_stops_the_server(
    live_server: LiveServer,
) -> None:
    if not live_server.embedded:
        pytest.skip("RUNE_LIVE_BASE_URL is set: no embedded server to stop")
    model_path = demo_model_path()
    assert model_path is not None
    with pytest.raises(KeyboardInterrupt), EmbeddedLlamaServer(model_path, ctx=512) as server:
        base_url = server.base_url
        with OpenAICompatTransport(base_url) as transport:
            # SmolLM2's own template is plain ChatML: no tools, so the text protocol.
            assert transport.supports_tools(server.model) is False
            assert transport.context_length(server.model) == 512
        raise KeyboardInterrupt  # what Ctrl-C raises in the main thread
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/health", timeout=2, trust_env=False)


# --- the embedded backend without a server ---------------------------------------------------


def test_a_missing_extra_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # what an absent package looks like
    # This Rune runs from a venv (not pipx, not uv tool): the hint is that venv's pip.
    with pytest.raises(BackendUnavailable, match="not installed") as missing:
        EmbeddedLlamaServer(model).start()
    assert f"{shlex.quote(sys.executable)} -m pip install xllamacpp==" in str(missing.value)


def test_a_missing_model_file_is_backend_unavailable(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="model file not found"):
        EmbeddedLlamaServer(tmp_path / "absent.gguf").start()


def test_a_file_that_is_not_a_model_is_backend_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    model = tmp_path / "notes.gguf"
    model.write_text("not a model")
    server = EmbeddedLlamaServer(model)
    with pytest.raises(BackendUnavailable, match="could not serve"):
        server.start()
    assert not server.running


def test_chat_templates_by_bundled_name_or_file(tmp_path: Path) -> None:
    bundled = load_chat_template("qwen25-tools")
    assert "{%- if tools %}" in bundled and "<tool_call>" in bundled
    own = tmp_path / "mine.jinja"
    own.write_text("{{ messages }}")
    assert load_chat_template(str(own)) == "{{ messages }}"
    with pytest.raises(ConfigError, match="qwen25-tools"):
        load_chat_template("no-such-template")
