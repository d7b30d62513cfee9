"""A reply that repeats itself is stopped early (rune.transport.repetition), on the real wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes.openai_server import FakeOpenAIServer, text_reply

from fakes.ollama_server import FakeModel, FakeOllama
from fakes.ollama_server import text_reply as ollama_text
from rune.events import TextDelta
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.ollama import OllamaChatTransport
from rune.transport.openai_compat import OpenAICompatTransport
from rune.transport.repetition import MIN_SPAN, RepetitionGuard, repeating_tail, same_shape

SRC = Path(__file__).resolve().parents[1] / "src" / "rune"
LOOPING_LINE = "        result = result + value\\n"
#: what a looping small model streams inside a constrained reply: a call whose code repeats
LOOPING_PIECES = ['{"tool": "run_python", "arguments": {"code": "', *[LOOPING_LINE] * 200]


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_a_line_repeated_is_found_with_its_length() -> None:
    assert repeating_tail("def f():\n" + "    x += 1\n" * 30) == len("    x += 1\n")
    assert repeating_tail("{" + " " * 400) == 1


def test_real_code_and_prose_never_look_repeated() -> None:
    """Every prefix of Rune's own modules, as a stream would grow, numbers aside: no false
    alarm."""
    sources = sorted(SRC.rglob("*.py"))[:40]
    assert len(sources) == 40
    for path in sources:
        text = same_shape(path.read_text(encoding="utf-8"))
        for end in range(MIN_SPAN, len(text), 16):
            assert repeating_tail(text[max(0, end - 800) : end]) is None, (path, end)


def test_a_reply_that_counts_is_stopped_too(openai_server: FakeOpenAIServer) -> None:
    counting = ['{"tool": "replace_function", "arguments": {"code": "SUFFIXES = {\\n']
    counting += [f'    {n}: \\"th\\",\\n' for n in range(4, 300)]
    openai_server.script(text_reply(*counting))
    guard = RepetitionGuard(OpenAICompatTransport(openai_server.base_url, read_timeout=5))
    result = guard.chat("m", [{"role": "user", "content": "hi"}])
    assert result.done_reason == "length"
    assert len(str(result.message["content"])) < len("".join(counting)) // 10


def test_three_copies_of_a_short_line_are_not_a_loop() -> None:
    assert repeating_tail("x = [\n" + "    0,\n" * 3 + "]\n") is None


def test_openai_stream_is_stopped_and_returned_cut_off(openai_server: FakeOpenAIServer) -> None:
    openai_server.script(text_reply(*LOOPING_PIECES))
    seen: list[str] = []
    guard = RepetitionGuard(OpenAICompatTransport(openai_server.base_url, read_timeout=5))
    result = guard.chat(
        "m",
        [{"role": "user", "content": "hi"}],
        on_delta=lambda d: seen.append(d.text) if isinstance(d, TextDelta) else None,
    )
    content = str(result.message["content"])
    full = "".join(LOOPING_PIECES)
    assert result.done_reason == "length"
    assert full.startswith(content) and len(content) < len(full) // 10
    assert "".join(seen) == content  # the caller's sink saw every piece it got
    assert "repeated itself" in result.warnings[0]


def test_a_reply_that_does_not_repeat_passes_unchanged(openai_server: FakeOpenAIServer) -> None:
    reply = json.dumps({"answer": "Fixed add() in calc.py: it returned a - b."})
    openai_server.script(text_reply(*[reply[i : i + 5] for i in range(0, len(reply), 5)]))
    guard = RepetitionGuard(OpenAICompatTransport(openai_server.base_url, read_timeout=5))
    result = guard.chat("m", [{"role": "user", "content": "hi"}])
    assert result.message["content"] == reply
    assert result.done_reason == "stop" and result.warnings == ()


def test_ollama_stream_is_stopped_too() -> None:
    with FakeOllama([FakeModel("small:latest", ("completion",))]) as ollama:
        ollama.script(ollama_text("".join(LOOPING_PIECES)))
        guard = RepetitionGuard(OllamaChatTransport(ollama.url, read_timeout=5))
        result = guard.chat("small", [{"role": "user", "content": "hi"}])
    assert result.done_reason == "length"
    assert len(str(result.message["content"])) < len("".join(LOOPING_PIECES)) // 10


def test_the_loop_sends_a_looping_reply_back_instead_of_running_it(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Constrained protocol: the cut reply is unusable, the model is told, and its next turn
    (an answer) ends the run; nothing of the looping call ran."""
    openai_server.script(
        text_reply(*LOOPING_PIECES), text_reply(json.dumps({"answer": "Nothing to change."}))
    )
    transport = RepetitionGuard(OpenAICompatTransport(openai_server.base_url, read_timeout=5))
    executor = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path)
    runtime = LocalToolRuntime(transport, executor, model="m", protocol="constrained")
    response = runtime.run([{"role": "user", "content": "Sum the values."}])
    assert response.success and response.text == "Nothing to change."
    assert [e.name for e in response.events] == []
    fed_back = openai_server.chat_bodies[1]["messages"][-1]["content"]
    assert fed_back.startswith("Your reply could not be used")
    # the model hears why it was stopped: not the output cap, which it never reached
    assert "the reply repeated itself and Rune stopped it" in fed_back
    assert "output token limit" not in fed_back
    assert any("repeated itself" in w for w in response.warnings)
