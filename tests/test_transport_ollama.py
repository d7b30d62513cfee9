"""OllamaChatTransport against a real HTTP server speaking Ollama's wire format (docs/wire.md)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fakes.ollama_server import (
    FakeModel,
    FakeOllama,
    Reply,
    chunk,
    error_reply,
    final,
    reply,
    text_reply,
    tool_call,
    tool_reply,
)
from rune.errors import (
    ConfigError,
    ModelNotFound,
    ProtocolError,
    ServerError,
    ServerUnreachable,
    ToolsUnsupported,
    TransportError,
    TransportTimeout,
)
from rune.events import TextDelta, ThinkingDelta
from rune.transport.base import Transport
from rune.transport.ollama import OllamaChatTransport, parse_parameters, resolve_host

USER = [{"role": "user", "content": "What does calc.py do?"}]
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file.",
        "parameters": {
            "type": "object",
            "required": ["path"],
            "properties": {"path": {"type": "string", "description": "File path."}},
        },
    },
}


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
def transport(ollama: FakeOllama) -> Iterator[OllamaChatTransport]:
    with OllamaChatTransport(ollama.url, read_timeout=10) as client:
        yield client


def test_it_is_a_transport(transport: OllamaChatTransport) -> None:
    assert isinstance(transport, Transport)
    assert transport.native_source == "ollama-native"


# --- host resolution: the examples Ollama's own client documents --------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("", "http://127.0.0.1:11434"),
        ("1.2.3.4", "http://1.2.3.4:11434"),
        (":56789", "http://127.0.0.1:56789"),
        ("1.2.3.4:56789", "http://1.2.3.4:56789"),
        ("http://1.2.3.4", "http://1.2.3.4:80"),
        ("https://1.2.3.4", "https://1.2.3.4:443"),
        ("https://1.2.3.4:56789", "https://1.2.3.4:56789"),
        ("example.com", "http://example.com:11434"),
        ("example.com:56789/", "http://example.com:56789"),
        ("https://example.com/ollama", "https://example.com:443/ollama"),
        ("[::1]:9000", "http://[::1]:9000"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ('"localhost:1234"', "http://localhost:1234"),
    ],
)
def test_host_is_read_like_ollama_reads_it(
    given: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", given)
    assert resolve_host() == expected


def test_the_host_argument_wins_over_ollama_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.9:1234")
    assert resolve_host("localhost:7777") == "http://localhost:7777"
    monkeypatch.delenv("OLLAMA_HOST")
    assert resolve_host() == "http://127.0.0.1:11434"


@pytest.mark.parametrize("bad", ["ftp://example.com", "localhost:port", "localhost:99999"])
def test_a_bad_host_is_a_config_error(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", bad)
    with pytest.raises(ConfigError, match="OLLAMA_HOST"):
        OllamaChatTransport()


def test_a_bad_num_ctx_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="num_ctx"):
        OllamaChatTransport("127.0.0.1:1", num_ctx=0)


# --- streaming: text, thinking, tool calls ------------------------------------------------


def test_text_is_accumulated_and_usage_reported(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.script(
        reply(
            chunk("The file "),
            chunk("adds numbers."),
            final(done_reason="length", prompt_eval_count=31, eval_count=5),
        )
    )
    result = transport.chat("qwen3", USER)
    assert dict(result.message) == {"role": "assistant", "content": "The file adds numbers."}
    assert result.done_reason == "length"
    assert result.usage.prompt_tokens == 31 and result.usage.completion_tokens == 5
    assert result.warnings == ()


def test_deltas_are_delivered_as_they_arrive(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.script(
        reply(
            chunk(thinking="Let me see."),
            chunk("Hello"),
            chunk(", world"),
            final(),
            interval=0.25,
        )
    )
    seen: list[tuple[float, Any]] = []
    started = time.monotonic()
    result = transport.chat("qwen3", USER, on_delta=lambda d: seen.append((time.monotonic(), d)))
    finished = time.monotonic()
    assert [d for _, d in seen] == [
        ThinkingDelta("Let me see."),
        TextDelta("Hello"),
        TextDelta(", world"),
    ]
    # The first delta reached us while the server was still sending the rest.
    assert seen[0][0] - started < finished - started - 0.4
    assert result.message["thinking"] == "Let me see."


def test_tool_calls_on_a_middle_chunk_keep_ids_and_indexes(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    call = tool_call("read_file", {"path": "calc.py"}, id="call_k3v9x2qa")
    ollama.script(tool_reply(call))
    result = transport.chat("qwen3", USER, tools=[READ_TOOL])
    assert result.message["content"] == ""
    assert [dict(c) for c in result.message["tool_calls"]] == [
        {
            "id": "call_k3v9x2qa",
            "function": {"index": 0, "name": "read_file", "arguments": {"path": "calc.py"}},
        }
    ]


def test_tool_calls_on_the_final_chunk(ollama: FakeOllama, transport: OllamaChatTransport) -> None:
    ollama.script(tool_reply(tool_call("read_file", {"path": "a.py"}, id="call_a"), on_final=True))
    result = transport.chat("qwen3", USER, tools=[READ_TOOL])
    (call,) = result.message["tool_calls"]
    assert call["id"] == "call_a" and call["function"]["arguments"] == {"path": "a.py"}


def test_thinking_then_a_tool_call(ollama: FakeOllama, transport: OllamaChatTransport) -> None:
    ollama.script(
        tool_reply(
            tool_call("read_file", {"path": "calc.py"}),
            thinking="I should read calc.py before answering.",
        )
    )
    deltas: list[Any] = []
    result = transport.chat("qwen3", USER, tools=[READ_TOOL], think=True, on_delta=deltas.append)
    assert result.message["thinking"] == "I should read calc.py before answering."
    assert result.message["tool_calls"][0]["function"]["name"] == "read_file"
    assert "".join(d.text for d in deltas if isinstance(d, ThinkingDelta)) == (
        "I should read calc.py before answering."
    )
    assert not any(isinstance(d, TextDelta) for d in deltas)


def test_parallel_calls_across_chunks_are_all_kept_in_order(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    first = tool_call("read_file", {"path": "a.py"}, index=0, id="call_aaaaaaaa")
    second = tool_call("read_file", {"path": "b.py"}, index=1, id="call_bbbbbbbb")
    third = tool_call("read_file", {"path": "c.py"}, index=2, id="call_cccccccc")
    ollama.script(reply(chunk(tool_calls=[first, second]), final(tool_calls=[third])))
    result = transport.chat("qwen3", USER, tools=[READ_TOOL])
    calls = result.message["tool_calls"]
    assert [c["id"] for c in calls] == ["call_aaaaaaaa", "call_bbbbbbbb", "call_cccccccc"]
    assert [c["function"]["index"] for c in calls] == [0, 1, 2]


# --- the JSON Rune sends ------------------------------------------------------------------


def test_history_goes_back_with_ids_tool_names_and_thinking(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    history = [
        {"role": "system", "content": "You are a coding agent."},
        *USER,
        {
            "role": "assistant",
            "content": "",
            "thinking": "Read it first.",
            "tool_calls": [
                {
                    "id": "call_k3v9x2qa",
                    "function": {"index": 0, "name": "read_file", "arguments": {"path": "calc.py"}},
                }
            ],
        },
        {
            "role": "tool",
            "content": "1: def add(a, b):",
            "tool_name": "read_file",
            "tool_call_id": "call_k3v9x2qa",
        },
    ]
    ollama.script(text_reply("It adds."))
    transport.chat("qwen3", history, tools=[READ_TOOL], think=True, options={"temperature": 0})
    (sent,) = ollama.bodies()
    assert sent == {
        "model": "qwen3",
        "messages": history,
        "stream": True,
        "options": {"temperature": 0, "num_ctx": 8192},
        "tools": [READ_TOOL],
        "think": True,
    }


def test_string_arguments_in_history_are_sent_as_an_object(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    # Ollama answers 400 to string arguments; histories from OpenAI-style servers carry them.
    history = [
        *USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "function": {"name": "read_file", "arguments": '{"path": "x.py"}'}}
            ],
        },
    ]
    ollama.script(text_reply("ok"))
    transport.chat("qwen3", history)
    call = ollama.bodies()[0]["messages"][1]["tool_calls"][0]
    assert call == {"id": "c1", "function": {"name": "read_file", "arguments": {"path": "x.py"}}}


def test_think_is_sent_only_to_thinking_models(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.script(text_reply("a"), text_reply("b"), text_reply("c"))
    transport.chat("qwen3", USER, think=False)
    transport.chat("gemma3", USER, think=True)  # the real server answers 400 if think reaches it
    transport.chat("qwen3", USER)
    bodies = ollama.bodies()
    assert bodies[0]["think"] is False
    assert "think" not in bodies[1]
    assert "think" not in bodies[2]


@pytest.mark.parametrize(
    ("model", "ctor", "options", "expected"),
    [
        (FakeModel("m", context_length=40960), None, {"num_ctx": 2048}, 2048),
        (FakeModel("m", context_length=40960), 16384, None, 16384),
        (FakeModel("m", context_length=40960, parameters="num_ctx  12288"), None, None, 12288),
        (FakeModel("m", context_length=40960), None, {"temperature": 0.2}, 8192),
        (FakeModel("m", context_length=2048), None, None, 2048),
        (FakeModel("m", context_length=None), None, None, 4096),
    ],
    ids=["caller", "constructor", "modelfile", "capped-trained", "small-trained", "unknown"],
)
def test_num_ctx_is_always_sent(
    ollama: FakeOllama,
    model: FakeModel,
    ctor: int | None,
    options: dict[str, Any] | None,
    expected: int,
) -> None:
    ollama.add_model(model)
    ollama.script(text_reply("ok"))
    with OllamaChatTransport(ollama.url, num_ctx=ctor) as transport:
        transport.chat("m", USER, options=options)
        if "num_ctx" not in (options or {}):
            # The window a request must fit is the one sent, not the trained maximum.
            assert transport.context_length("m") == expected
    (sent,) = ollama.bodies()
    assert sent["options"]["num_ctx"] == expected
    assert sent["options"] == {**(options or {}), "num_ctx": expected}


# --- capability discovery -----------------------------------------------------------------


def test_capabilities_come_from_one_show_per_model(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.script(text_reply("a"), text_reply("b"))
    assert transport.supports_tools("qwen3") and transport.supports_thinking("qwen3")
    transport.chat("qwen3", USER, think=True)
    transport.chat("qwen3", USER)
    transport.context_length("qwen3")
    assert ollama.count("/api/show") == 1
    assert not transport.supports_tools("gemma3") and not transport.supports_thinking("gemma3")
    assert ollama.count("/api/show") == 2
    assert ollama.bodies("/api/show") == [{"model": "qwen3"}, {"model": "gemma3"}]


def test_context_length_is_the_architecture_key_of_model_info(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.add_model(FakeModel("llama3.1:8b", architecture="llama", context_length=131072))
    ollama.add_model(
        FakeModel(
            "odd",
            model_info={
                "general.architecture": "custom",
                "other.context_length": 32768,
                "general.parameter_count": 7_000_000_000,
            },
        )
    )
    assert transport.capabilities("llama3.1:8b").context_length == 131072
    # No "<arch>.context_length": any key ending in .context_length, as Ollama's CLI reads it.
    assert transport.capabilities("odd").context_length == 32768


def test_num_ctx_is_read_from_the_parameters_text(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    text = (
        'stop                           "<|im_start|>"\n'
        "num_ctx                        16384\n"
        'stop                           "<|im_end|>"\n'
        "temperature                    0.6\n"
    )
    ollama.add_model(FakeModel("tuned", parameters=text))
    assert transport.capabilities("tuned").num_ctx == 16384
    assert parse_parameters(text)["temperature"] == "0.6"


def test_an_ollama_without_a_capabilities_list_is_read_from_the_template(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.add_model(
        FakeModel("old-tools", capabilities=None, template="{{ if .Tools }}x{{ end }}")
    )
    ollama.add_model(FakeModel("old-plain", capabilities=None, template="{{ .Prompt }}"))
    assert transport.supports_tools("old-tools")
    assert not transport.supports_tools("old-plain")


def test_list_models_and_describe(ollama: FakeOllama, transport: OllamaChatTransport) -> None:
    assert transport.list_models() == ["qwen3:latest", "gemma3:latest"]
    assert transport.describe() == f"Ollama at {ollama.url}"


# --- silent truncation --------------------------------------------------------------------


def long_history(chars: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "x = 1  # padding line\n" * (chars // 22)}]


def test_a_prompt_eval_count_far_below_the_prompt_sent_is_a_warning(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    # About 10,000 tokens sent into num_ctx 8192; the runner kept num_ctx/2 + 2 (ollama#17427).
    ollama.script(reply(chunk("ok"), final(prompt_eval_count=4098)))
    result = transport.chat("qwen3", long_history(40_000))
    (warning,) = result.warnings
    assert "4098" in warning and "num_ctx 8192" in warning and "dropped" in warning
    assert result.usage.prompt_tokens == 4098
    assert result.usage.prompt_tokens_sent_estimate is not None
    assert result.usage.prompt_tokens_sent_estimate > 9000


@pytest.mark.parametrize(
    ("chars", "evaluated"),
    [(40_000, 11_500), (4_000, 40)],
    ids=["counted-whole", "small-prompt-small-count"],
)
def test_no_truncation_warning_without_a_truncation(
    ollama: FakeOllama, transport: OllamaChatTransport, chars: int, evaluated: int
) -> None:
    ollama.script(reply(chunk("ok"), final(prompt_eval_count=evaluated)))
    assert transport.chat("qwen3", long_history(chars)).warnings == ()


# --- errors -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_no_server_is_unreachable_with_the_way_out() -> None:
    port = free_port()
    with (
        OllamaChatTransport(f"127.0.0.1:{port}") as transport,
        pytest.raises(ServerUnreachable) as e,
    ):
        transport.chat("qwen3", USER)
    assert str(e.value) == (
        f"no Ollama at http://127.0.0.1:{port}: start it with `ollama serve` or set OLLAMA_HOST"
    )


def test_an_unknown_model_says_how_to_pull_it(transport: OllamaChatTransport) -> None:
    with pytest.raises(ModelNotFound, match=r"try `ollama pull qwen9:70b`"):
        transport.chat("qwen9:70b", USER)


def test_a_404_at_chat_time_is_model_not_found(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.script(error_reply(404, 'model "qwen3" not found, try pulling it first'))
    with pytest.raises(ModelNotFound, match="ollama pull qwen3"):
        transport.chat("qwen3", USER)


def test_a_400_carries_the_servers_message(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.script(error_reply(400, 'invalid think value: "maybe"'))
    with pytest.raises(ServerError, match='invalid think value: "maybe"') as e:
        transport.chat("qwen3", USER)
    assert e.value.status_code == 400


def test_a_model_without_tools_raises_and_is_remembered(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    ollama.add_model(FakeModel("mislabelled", capabilities=("completion", "tools")))
    ollama.script(
        error_reply(400, "registry.ollama.ai/library/mislabelled:latest does not support tools")
    )
    assert transport.supports_tools("mislabelled")
    with pytest.raises(ToolsUnsupported, match="does not support tools"):
        transport.chat("mislabelled", USER, tools=[READ_TOOL])
    assert not transport.supports_tools("mislabelled")
    assert ollama.count("/api/show") == 1


def test_tools_sent_to_a_model_without_them_is_tools_unsupported(
    ollama: FakeOllama, transport: OllamaChatTransport
) -> None:
    with pytest.raises(ToolsUnsupported):
        transport.chat("gemma3", USER, tools=[READ_TOOL])


@pytest.mark.parametrize(
    ("answer", "status", "text"),
    [
        (error_reply(500, "llama runner process has terminated: exit status 2"), 500, "exit"),
        (
            error_reply(503, "server busy, please try again. maximum pending requests exceeded"),
            503,
            "busy",
        ),
        (Reply(status=502, body="Bad Gateway"), 502, "Bad Gateway"),
    ],
    ids=["500", "503", "plain-text-502"],
)
def test_server_errors_carry_status_and_message(
    ollama: FakeOllama, transport: OllamaChatTransport, answer: Reply, status: int, text: str
) -> None:
    ollama.script(answer)
    with pytest.raises(ServerError, match=text) as e:
        transport.chat("qwen3", USER)
    assert e.value.status_code == status


def test_an_error_line_in_a_200_stream(ollama: FakeOllama, transport: OllamaChatTransport) -> None:
    ollama.script(
        reply(
            chunk("Let me "),
            {"error": "error parsing tool call: raw='{\"name\":', err=unexpected end of JSON"},
        )
    )
    with pytest.raises(ServerError, match="error parsing tool call") as e:
        transport.chat("qwen3", USER, on_delta=lambda d: None)
    assert e.value.status_code is None


@pytest.mark.parametrize(
    ("answer", "error", "text"),
    [
        (reply(chunk("Hel"), "{not json"), ProtocolError, "not JSON"),
        (reply(chunk("Hel"), '["a list"]'), ProtocolError, "not an object"),
        (reply(chunk("Hel"), cut=True), ProtocolError, "dropped mid-stream"),
        (reply(chunk("Hel"), chunk("lo")), ProtocolError, "ended before its final chunk"),
        (
            reply({"message": {"content": "", "tool_calls": "read"}, "done": True}),
            ProtocolError,
            "tool_calls",
        ),
    ],
    ids=["malformed-line", "not-an-object", "cut-off", "no-final-chunk", "bad-tool-calls"],
)
def test_broken_streams_are_protocol_errors(
    ollama: FakeOllama,
    transport: OllamaChatTransport,
    answer: Reply,
    error: type[TransportError],
    text: str,
) -> None:
    ollama.script(answer)
    with pytest.raises(error, match=text):
        transport.chat("qwen3", USER)


def test_a_server_that_never_answers_times_out_quickly(ollama: FakeOllama) -> None:
    ollama.script(Reply(stall=30))
    started = time.monotonic()
    with (
        OllamaChatTransport(ollama.url, read_timeout=0.3) as transport,
        pytest.raises(TransportTimeout, match=r"sent nothing for 0\.3 s"),
    ):
        transport.chat("qwen3", USER)
    assert time.monotonic() - started < 3


def test_a_stream_that_stalls_midway_times_out(ollama: FakeOllama) -> None:
    ollama.script(reply(chunk("Hel"), final(), interval=30))
    with (
        OllamaChatTransport(ollama.url, read_timeout=0.3) as transport,
        pytest.raises(TransportTimeout),
    ):
        transport.chat("qwen3", USER)


def test_a_server_that_is_not_ollama_is_a_server_error(ollama: FakeOllama) -> None:
    # A wrong path prefix: the server answers Go's plain-text 404 for every /api route.
    with OllamaChatTransport(ollama.url + "/nothing") as transport:
        not_ollama = r"404 page not found — is http://127\.0\.0\.1:\d+ really Ollama\?"
        with pytest.raises(ServerError, match=not_ollama) as e:
            transport.supports_tools("qwen3")
        assert e.value.status_code == 404
