"""OllamaChatTransport driving LocalToolRuntime end to end, over real HTTP to a fake Ollama."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
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
from rune import events as ev
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.ollama import OllamaChatTransport

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
USER = [{"role": "user", "content": "Fix the bug in calc.py."}]
READ_CALL = '<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}}</tool_call>'


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(BROKEN)
    return tmp_path


def runtime(
    ollama: FakeOllama, project: Path, model: str, **kw: Any
) -> tuple[LocalToolRuntime, list[Any]]:
    seen: list[Any] = []
    transport = OllamaChatTransport(ollama.url, read_timeout=10)
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    rt = LocalToolRuntime(transport, executor, model=model, on_event=seen.append, **kw)
    return rt, seen


def last_message(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return body["messages"][-1]


def fix_after_reading(body: Mapping[str, Any]) -> Reply:
    """Answers like a model: writes the fix only if the tool result showed the bug."""
    if "return a - b" in str(last_message(body).get("content")):
        fix = {"path": "calc.py", "content": FIXED}
        return tool_reply(tool_call("write_file", fix, id="call_write001"))
    return text_reply("I could not see the file.")


def test_native_tool_calls_read_pause_approve_and_finish(ollama: FakeOllama, project: Path) -> None:
    ollama.script(
        tool_reply(
            tool_call("read_file", {"path": "calc.py"}, id="call_read0001"),
            thinking="Read the file first.",
        ),
        fix_after_reading,
        text_reply("Fixed: add now returns a + b."),
    )
    rt, seen = runtime(ollama, project, "qwen3", think=True)

    paused = rt.run(USER)
    assert paused.paused and paused.pending is not None
    assert paused.pending.name == "write_file"
    assert (project / "calc.py").read_text() == BROKEN

    done = rt.approve(paused.pending_state)
    assert done.success, done.error
    assert done.text == "Fixed: add now returns a + b."
    assert (project / "calc.py").read_text() == FIXED
    assert [(e.name, e.status, e.source) for e in done.events] == [
        ("read_file", "done", "ollama-native"),
        ("write_file", "done", "ollama-native"),
    ]
    assert done.iterations_used == 3

    bodies = ollama.bodies()
    assert all(b["tools"] and b["think"] is True and b["options"]["num_ctx"] for b in bodies)
    _, second, third = bodies
    assistant, result = second["messages"][-2:]
    assert assistant["thinking"] == "Read the file first."
    assert assistant["tool_calls"][0]["id"] == "call_read0001"
    assert assistant["tool_calls"][0]["function"]["index"] == 0
    assert result["role"] == "tool" and result["tool_name"] == "read_file"
    assert result["tool_call_id"] == "call_read0001"
    assert "return a - b" in result["content"]
    assert last_message(third)["tool_call_id"] == "call_write001"
    assert any(isinstance(e, ev.ThinkingDelta) for e in seen)
    assert ollama.count("/api/show") == 1


def test_a_model_without_tools_goes_through_the_text_fallback(
    ollama: FakeOllama, project: Path
) -> None:
    ollama.script(text_reply(READ_CALL), text_reply("add subtracts; it should add."))
    rt, seen = runtime(ollama, project, "gemma3", think=True)

    resp = rt.run(USER)
    assert resp.success, resp.error
    assert resp.text == "add subtracts; it should add."
    assert resp.protocol == "text-fallback"
    assert [(e.name, e.status, e.source) for e in resp.events] == [
        ("read_file", "done", "text-fallback")
    ]
    first, second = ollama.bodies()
    assert not any("tools" in b or "think" in b for b in (first, second))
    (injected,) = [e for e in seen if isinstance(e, ev.FallbackPromptInjected)]
    assert first["messages"][0] == {"role": "system", "content": injected.prompt}
    assert "<tool_call>" in injected.prompt
    assert "return a - b" in last_message(second)["content"]


def test_a_server_refusing_tools_mid_run_switches_to_the_fallback_and_remembers(
    ollama: FakeOllama, project: Path
) -> None:
    ollama.add_model(FakeModel("mislabelled", capabilities=("completion", "tools")))
    ollama.script(
        error_reply(400, "registry.ollama.ai/library/mislabelled:latest does not support tools"),
        text_reply(READ_CALL),
        text_reply("It subtracts."),
        text_reply("Still subtracts."),
    )
    rt, _ = runtime(ollama, project, "mislabelled")

    resp = rt.run(USER)
    assert resp.success, resp.error
    assert resp.protocol == "text-fallback"
    assert any("does not support tools" in w for w in resp.warnings)
    bodies = ollama.bodies()
    assert "tools" in bodies[0] and "tools" not in bodies[1]

    again = rt.run([{"role": "user", "content": "And now?"}])
    assert again.success and again.protocol == "text-fallback"
    assert "tools" not in ollama.bodies()[3]
    assert ollama.count("/api/show") == 1


def test_a_silently_truncated_prompt_reaches_the_caller_as_a_warning(
    ollama: FakeOllama, project: Path
) -> None:
    long_task = [{"role": "user", "content": "Context:\n" + "x = 1  # filler\n" * 3000}]
    ollama.script(reply(chunk("Done."), final(prompt_eval_count=4098)))
    rt, seen = runtime(ollama, project, "qwen3")

    resp = rt.run(long_task)
    assert resp.success
    (warning,) = resp.warnings
    assert "4098" in warning
    assert [e.message for e in seen if isinstance(e, ev.Warning)] == [warning]


def test_an_unknown_model_ends_the_run_with_a_typed_failure(
    ollama: FakeOllama, project: Path
) -> None:
    rt, _ = runtime(ollama, project, "qwen9:70b")
    resp = rt.run(USER)
    assert not resp.success
    assert resp.error_kind == "ModelNotFound"
    assert resp.error is not None and "ollama pull qwen9:70b" in resp.error
    assert ollama.count("/api/chat") == 0
