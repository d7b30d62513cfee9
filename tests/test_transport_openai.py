"""OpenAICompatTransport against a real local HTTP server speaking llama-server's wire format."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.openai_server import (
    LLAMA_MODELS,
    LLAMA_PROPS,
    MODEL_ID,
    FakeOpenAIServer,
    Reply,
    chunk,
    error_reply,
    role_chunk,
    text_reply,
    tool_call_reply,
    usage_chunk,
)

from rune import LocalToolRuntime, OpenAICompatTransport, SandboxPolicy, ToolExecutor
from rune.errors import (
    ContextOverflow,
    ModelNotFound,
    ProtocolError,
    ServerError,
    ServerUnreachable,
    ToolsUnsupported,
    TransportTimeout,
)
from rune.events import TextDelta, ThinkingDelta

READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def transport_for(fake: FakeOpenAIServer, **kw: Any) -> OpenAICompatTransport:
    kw.setdefault("read_timeout", 5.0)
    return OpenAICompatTransport(fake.base_url, **kw)


# --- the request on the wire ----------------------------------------------------------------


def test_request_is_translated_to_the_openai_shape(server: FakeOpenAIServer) -> None:
    server.script(text_reply("ok"))
    history = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix calc.py"},
        {
            "role": "assistant",
            "content": "",
            "thinking": "I should read it first.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "function": {"index": 0, "name": "read_file", "arguments": {"path": "calc.py"}},
                }
            ],
        },
        {
            "role": "tool",
            "content": "1\tdef add",
            "tool_name": "read_file",
            "tool_call_id": "call_1",
        },
    ]
    options = {"num_ctx": 8192, "temperature": 0.2, "num_predict": 64, "stop": ["</tool_call>"]}
    with transport_for(server, api_key="sk-local") as transport:
        transport.chat(MODEL_ID, history, tools=[READ_TOOL], options=options)

    (body,) = server.chat_bodies
    assert body == {
        "model": MODEL_ID,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [READ_TOOL],
        "temperature": 0.2,
        "max_tokens": 64,
        "stop": ["</tool_call>"],
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix calc.py"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
                    }
                ],
            },
            {"role": "tool", "content": "1\tdef add", "tool_call_id": "call_1"},
        ],
    }
    chat = next(r for r in server.requests if r.method == "POST")
    assert chat.headers["Authorization"] == "Bearer sk-local"


def test_tool_choice_and_logit_bias_pass_through_and_unlimited_num_predict_is_left_out(
    server: FakeOpenAIServer,
) -> None:
    server.script(text_reply("ok"))
    with transport_for(server) as transport:
        transport.chat(
            MODEL_ID,
            [{"role": "user", "content": "hi"}],
            tools=[READ_TOOL],
            options={
                "tool_choice": "required",
                "num_predict": -1,
                "mirostat": 2,
                "logit_bias": [[151644, False]],
            },
        )
    (body,) = server.chat_bodies
    assert body["tool_choice"] == "required"
    assert body["logit_bias"] == [[151644, False]]
    assert "max_tokens" not in body
    assert "mirostat" not in body and "num_ctx" not in body


def test_calls_without_ids_get_ids_and_results_are_paired_by_name(
    server: FakeOpenAIServer,
) -> None:
    server.script(text_reply("ok"))
    history = [
        {"role": "user", "content": "read both"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "read_file", "arguments": {"path": "a"}}},
                {"function": {"name": "list_dir", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": "listing", "tool_name": "list_dir"},
        {"role": "tool", "content": "file a", "tool_name": "read_file"},
    ]
    with transport_for(server) as transport:
        transport.chat(MODEL_ID, history)
    messages = server.chat_bodies[0]["messages"]
    read_id, list_id = (c["id"] for c in messages[1]["tool_calls"])
    assert read_id != list_id
    assert messages[2] == {"role": "tool", "content": "listing", "tool_call_id": list_id}
    assert messages[3] == {"role": "tool", "content": "file a", "tool_call_id": read_id}


def test_think_is_sent_only_to_a_template_with_a_thinking_switch() -> None:
    props = {**LLAMA_PROPS, "chat_template": "{% if enable_thinking %}<think>{% endif %}"}
    with FakeOpenAIServer(props=props) as thinker, FakeOpenAIServer() as plain:
        for fake in (thinker, plain):
            fake.script(text_reply("ok"))
            with transport_for(fake) as transport:
                transport.chat(MODEL_ID, [{"role": "user", "content": "hi"}], think=False)
        assert thinker.chat_bodies[0]["chat_template_kwargs"] == {"enable_thinking": False}
        assert "chat_template_kwargs" not in plain.chat_bodies[0]


# --- the answer: streaming and assembly -------------------------------------------------------


def test_text_streams_as_deltas_and_usage_is_read(server: FakeOpenAIServer) -> None:
    server.script(text_reply("One", " day", ","))
    seen: list[Any] = []
    with transport_for(server) as transport:
        result = transport.chat(
            MODEL_ID, [{"role": "user", "content": "story"}], on_delta=seen.append
        )
    assert seen == [TextDelta("One"), TextDelta(" day"), TextDelta(",")]
    assert result.message["content"] == "One day,"
    assert "tool_calls" not in result.message
    assert result.done_reason == "stop"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (36, 3)
    assert result.usage.cached_prompt_tokens == 21
    assert result.warnings == ()


def test_parallel_tool_calls_interleaved_by_index_are_assembled(server: FakeOpenAIServer) -> None:
    def piece(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    def head(index: int, call_id: str) -> dict[str, Any]:
        function = {"name": "read_file", "arguments": ""}
        return piece(index, id=call_id, type="function", function=function)

    def expected(index: int, call_id: str, path: str) -> dict[str, Any]:
        function = {"index": index, "name": "read_file", "arguments": {"path": path}}
        return {"id": call_id, "function": function}

    server.script(
        Reply(
            [
                role_chunk(),
                piece(
                    0, id="call_a", type="function", function={"name": "read_file", "arguments": ""}
                ),
                piece(
                    1, id="call_b", type="function", function={"name": "read_file", "arguments": ""}
                ),
                piece(0, function={"arguments": '{"pa'}),
                piece(1, function={"arguments": '{"path": '}),
                piece(0, function={"arguments": 'th": "a.py"}'}),
                piece(1, function={"arguments": '"b.py"}'}),
                chunk({}, "tool_calls"),
                usage_chunk(204, 31, 0),
            ]
        )
    )
    with transport_for(server) as transport:
        result = transport.chat(MODEL_ID, [{"role": "user", "content": "x"}], tools=[READ_TOOL])
    assert [dict(c) for c in result.message["tool_calls"]] == [
        {
            "id": "call_a",
            "function": {"index": 0, "name": "read_file", "arguments": {"path": "a.py"}},
        },
        {
            "id": "call_b",
            "function": {"index": 1, "name": "read_file", "arguments": {"path": "b.py"}},
        },
    ]
    assert result.done_reason == "tool_calls"


def test_undecodable_arguments_are_kept_as_the_raw_string(server: FakeOpenAIServer) -> None:
    server.script(
        Reply(
            [
                chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "read_file"}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a'}}]}),
                chunk({}, "tool_calls"),
            ]
        )
    )
    with transport_for(server) as transport:
        result = transport.chat(MODEL_ID, [{"role": "user", "content": "x"}], tools=[READ_TOOL])
    assert result.message["tool_calls"][0]["function"]["arguments"] == '{"path": "a'


def test_reasoning_content_becomes_thinking(server: FakeOpenAIServer) -> None:
    server.script(
        Reply(
            [
                role_chunk(),
                chunk({"reasoning_content": "Let me "}),
                chunk({"reasoning_content": "think."}),
                chunk({"content": "Done."}),
                chunk({}, "stop"),
            ]
        )
    )
    seen: list[Any] = []
    with transport_for(server) as transport:
        result = transport.chat(MODEL_ID, [{"role": "user", "content": "x"}], on_delta=seen.append)
    assert seen == [ThinkingDelta("Let me "), ThinkingDelta("think."), TextDelta("Done.")]
    assert result.message["thinking"] == "Let me think."
    assert result.message["content"] == "Done."


def test_usage_comes_from_timings_when_the_server_sends_no_usage_block(
    server: FakeOpenAIServer,
) -> None:
    timings = {"cache_n": 32, "prompt_n": 3, "predicted_n": 5}
    server.script(Reply([chunk({"content": "hi"}), chunk({}, "stop", timings=timings)]))
    with transport_for(server) as transport:
        usage = transport.chat(MODEL_ID, [{"role": "user", "content": "x"}]).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens) == (35, 5, 32)


def test_finish_reason_length_is_a_warning(server: FakeOpenAIServer) -> None:
    server.script(text_reply("One", " day", finish_reason="length"))
    with transport_for(server) as transport:
        result = transport.chat(
            MODEL_ID, [{"role": "user", "content": "x"}], options={"max_tokens": 2}
        )
    assert result.done_reason == "length"
    (warning,) = result.warnings
    assert "2 tokens" in warning and "cut off" in warning


def test_a_non_streamed_answer_is_read_too(server: FakeOpenAIServer) -> None:
    body = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "b"}'},
                        },
                    ],
                },
            }
        ],
        "object": "chat.completion",
        "usage": {"completion_tokens": 9, "prompt_tokens": 40, "total_tokens": 49},
    }
    server.script(Reply(body=body))
    with transport_for(server) as transport:
        result = transport.chat(
            MODEL_ID,
            [{"role": "user", "content": "x"}],
            tools=[READ_TOOL],
            options={"stream": False},
        )
    sent = server.chat_bodies[0]
    assert sent["stream"] is False and "stream_options" not in sent
    calls = result.message["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]["path"]) for c in calls] == [
        ("c1", "a"),
        ("c2", "b"),
    ]
    assert result.usage.prompt_tokens == 40


def test_connections_closed_after_a_stream_do_not_break_the_next_request() -> None:
    # llama-server closes the socket after each streamed answer despite "Keep-Alive".
    with FakeOpenAIServer(linger=0.05) as fake:
        fake.script(*(text_reply(f"answer {n}") for n in range(4)))
        with transport_for(fake) as transport:
            answers = [
                transport.chat(MODEL_ID, [{"role": "user", "content": "x"}]).message["content"]
                for _ in range(4)
            ]
    assert answers == [f"answer {n}" for n in range(4)]


# --- errors -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening_is_server_unreachable_with_a_hint() -> None:
    with OpenAICompatTransport(f"http://127.0.0.1:{free_port()}/v1") as transport:
        with pytest.raises(ServerUnreachable) as caught:
            transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])
        with pytest.raises(ServerUnreachable):
            transport.supports_tools(MODEL_ID)
    assert "llama-server" in str(caught.value) and "--backend URL" in str(caught.value)


@pytest.mark.parametrize(
    ("reply", "error", "status", "words"),
    [
        (
            error_reply(404, "The model `qwen3:8b` does not exist.", "NotFoundError"),
            ModelNotFound,
            None,
            "/v1/models",
        ),
        (error_reply(404, "File Not Found", "not_found_error"), ServerError, 404, "File Not Found"),
        (
            error_reply(400, "Expected 'messages' to be an array"),
            ServerError,
            400,
            "Expected 'messages' to be an array",
        ),
        (error_reply(500, "boom", "server_error"), ServerError, 500, "boom"),
        (Reply(status=502, body="Bad Gateway"), ServerError, 502, "Bad Gateway"),
    ],
)
def test_error_answers_become_typed_errors(
    server: FakeOpenAIServer, reply: Reply, error: type[Exception], status: int | None, words: str
) -> None:
    server.script(reply)
    with transport_for(server) as transport, pytest.raises(error) as caught:
        transport.chat("qwen3:8b", [{"role": "user", "content": "x"}])
    assert words in str(caught.value)
    if status is not None:
        assert caught.value.status_code == status  # type: ignore[attr-defined]


def test_a_prompt_over_the_window_is_context_overflow(server: FakeOpenAIServer) -> None:
    message = "request (5033 tokens) exceeds the available context size (4096 tokens)"
    server.script(error_reply(400, message, "exceed_context_size_error"))
    with transport_for(server) as transport, pytest.raises(ContextOverflow, match="5033"):
        transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])


MID_STREAM_ERROR = "The model produced output that does not match the expected peg-native format"


@pytest.mark.parametrize(
    ("event", "status"),
    [
        ({"error": {"code": 500, "message": MID_STREAM_ERROR, "type": "server_error"}}, 500),
        ({"object": "error", "message": MID_STREAM_ERROR, "code": 400}, 400),
    ],
    ids=["llama-server", "vllm"],
)
def test_an_error_event_mid_stream_is_a_server_error(
    server: FakeOpenAIServer, event: dict[str, Any], status: int
) -> None:
    server.script(Reply([role_chunk(), chunk({"content": "One"}), event]))
    with transport_for(server) as transport, pytest.raises(ServerError) as caught:
        transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])
    assert MID_STREAM_ERROR in str(caught.value)
    assert caught.value.status_code == status


@pytest.mark.parametrize(
    "events",
    [
        [role_chunk(), 'data: {"choices": [{"delta": \n\n'],
        [role_chunk(), "data: [1, 2]\n\n"],
    ],
    ids=["broken-json", "not-an-object"],
)
def test_malformed_sse_is_a_protocol_error(server: FakeOpenAIServer, events: list[Any]) -> None:
    server.script(Reply(events))
    with transport_for(server) as transport, pytest.raises(ProtocolError, match="stream event"):
        transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])


def test_a_stream_cut_off_halfway_is_a_protocol_error(server: FakeOpenAIServer) -> None:
    server.script(Reply([role_chunk(), chunk({"content": "One"}), chunk({}, "stop")], cut_after=2))
    with transport_for(server) as transport, pytest.raises(ProtocolError, match="dropped"):
        transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])


def test_a_stream_that_ends_without_finishing_is_a_protocol_error(
    server: FakeOpenAIServer,
) -> None:
    server.script(Reply([role_chunk(), chunk({"content": "One"})], done=False))
    with transport_for(server) as transport, pytest.raises(ProtocolError, match="finish_reason"):
        transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])


@pytest.mark.parametrize("stall_after", [0, 1], ids=["before-headers", "mid-stream"])
def test_a_server_that_goes_silent_times_out_quickly(
    server: FakeOpenAIServer, stall_after: int
) -> None:
    server.script(Reply([role_chunk(), chunk({"content": "One"})], stall_after=stall_after))
    started = time.monotonic()
    with transport_for(server, read_timeout=0.3) as transport, pytest.raises(TransportTimeout):
        transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])
    assert time.monotonic() - started < 3


def test_a_server_refusing_tools_switches_the_model_to_the_fallback(
    server: FakeOpenAIServer,
) -> None:
    server.script(error_reply(400, "tools param requires --jinja flag"))
    with transport_for(server) as transport:
        assert transport.supports_tools(MODEL_ID)
        with pytest.raises(ToolsUnsupported, match="text tool protocol"):
            transport.chat(MODEL_ID, [{"role": "user", "content": "x"}], tools=[READ_TOOL])
        assert not transport.supports_tools(MODEL_ID)


# --- capability discovery -------------------------------------------------------------------


def test_llama_server_capabilities_come_from_props_and_models(server: FakeOpenAIServer) -> None:
    with transport_for(server) as transport:
        caps = transport.capabilities(MODEL_ID)
        assert transport.context_length(MODEL_ID) == 4096
        assert transport.supports_tools(MODEL_ID) and not transport.supports_thinking(MODEL_ID)
        transport.capabilities(MODEL_ID)
        description = transport.describe()
    assert (caps.tools, caps.num_ctx, caps.context_length) == (True, 4096, 8192)
    assert [r.path for r in server.requests] == ["/props", "/v1/models"]  # asked once
    assert "llama.cpp" in description and server.base_url in description


def test_a_template_without_tools_means_the_text_fallback() -> None:
    props = {**LLAMA_PROPS, "chat_template_caps": {"supports_tools": False}}
    with FakeOpenAIServer(props=props) as fake, transport_for(fake) as transport:
        assert transport.supports_tools(MODEL_ID) is False


def test_a_server_without_props_is_read_from_v1_models() -> None:
    listing = {"data": [{"id": "a", "max_model_len": 1000}, {"id": "b", "max_model_len": 32768}]}
    with FakeOpenAIServer(props=None, models=listing) as fake, transport_for(fake) as transport:
        caps = transport.capabilities("b")
        assert transport.context_length("b") == 32768
        assert transport.context_length("unknown") is None
        assert transport.list_models() == ["a", "b"]
        assert "llama.cpp" not in transport.describe()
    assert caps.tools is True and caps.num_ctx is None


def test_constructor_overrides_win_over_discovery(server: FakeOpenAIServer) -> None:
    with transport_for(server, context_length=2048, tools=False) as transport:
        assert transport.context_length(MODEL_ID) == 2048
        assert transport.supports_tools(MODEL_ID) is False
        assert transport.capabilities(MODEL_ID).num_ctx == 4096


def test_a_server_that_offers_no_discovery_uses_the_overrides() -> None:
    with FakeOpenAIServer(props=None, models=None) as fake:
        with transport_for(fake) as bare:
            assert bare.supports_tools("m") and bare.context_length("m") is None
        with transport_for(fake, context_length=16384) as told:
            assert told.context_length("m") == 16384


def test_base_url_with_or_without_v1_reaches_the_same_routes(server: FakeOpenAIServer) -> None:
    for base in (server.base_url, server.base_url + "/v1/", server.base_url + "/v1"):
        server.script(text_reply("ok"))
        with OpenAICompatTransport(base) as transport:
            transport.chat(MODEL_ID, [{"role": "user", "content": "x"}])
            assert transport.list_models() == [LLAMA_MODELS["data"][0]["id"]]
    assert {r.path for r in server.requests} == {"/v1/chat/completions", "/v1/models"}


# --- driving LocalToolRuntime ---------------------------------------------------------------


BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def test_runtime_fixes_a_file_through_native_calls_and_approval(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "calc.py").write_text(BROKEN)
    server.script(
        tool_call_reply(("call_r", "read_file", {"path": "calc.py"})),
        tool_call_reply(("call_w", "write_file", {"path": "calc.py", "content": FIXED})),
        text_reply("Fixed: add now adds."),
    )
    executor = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path)
    with transport_for(server) as transport:
        runtime = LocalToolRuntime(transport, executor, model=MODEL_ID, max_iterations=6)
        paused = runtime.run([{"role": "user", "content": "Fix the bug in calc.py"}])
        assert paused.paused and paused.pending is not None, (paused.events, paused.error)
        assert (tmp_path / "calc.py").read_text() == BROKEN  # nothing before approval
        done = runtime.approve(paused.pending_state)  # type: ignore[arg-type]

    assert done.success, done.error
    assert done.text == "Fixed: add now adds."
    assert (tmp_path / "calc.py").read_text() == FIXED
    assert [(e.name, e.status, e.source) for e in done.events] == [
        ("read_file", "done", "openai-native"),
        ("write_file", "done", "openai-native"),
    ]
    assert done.iterations_used == 3
    second, third = server.chat_bodies[1], server.chat_bodies[2]
    read_result = second["messages"][-1]
    assert read_result["role"] == "tool" and read_result["tool_call_id"] == "call_r"
    assert "return a - b" in read_result["content"]
    assert json.loads(second["messages"][-2]["tool_calls"][0]["function"]["arguments"]) == {
        "path": "calc.py"
    }
    assert third["messages"][-1]["tool_call_id"] == "call_w"
    assert all(body["tools"] for body in server.chat_bodies)


def test_runtime_uses_the_text_fallback_when_the_template_has_no_tools(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(BROKEN)
    props = {**LLAMA_PROPS, "chat_template_caps": {"supports_tools": False}}
    call = '<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}}</tool_call>'
    with FakeOpenAIServer(props=props) as fake:
        fake.script(text_reply(call), text_reply("It subtracts."))
        executor = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path)
        with transport_for(fake) as transport:
            runtime = LocalToolRuntime(transport, executor, model=MODEL_ID, max_iterations=4)
            response = runtime.run([{"role": "user", "content": "What does add do?"}])
        bodies = fake.chat_bodies
    assert response.success and response.text == "It subtracts."
    assert response.protocol == "text-fallback"
    assert [(e.name, e.source) for e in response.events] == [("read_file", "text-fallback")]
    assert all("tools" not in body for body in bodies)
    assert "return a - b" in bodies[1]["messages"][-1]["content"]
