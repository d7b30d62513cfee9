"""The text-fallback path end to end: a model without native tools works through the loop.

Scripted models stand for the server (``ScriptedTransport`` replays replies as a real model's
text); files are real files in a tmp workspace. The live variant talks to the real server of the
``live_server`` fixture and checks invariants only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from live.server import LiveServer
from rune import events as ev
from rune.formats.fallback import expected_format_hint, fallback_prompt
from rune.messages import OperatorResponse
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TASK = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the bug in add() in utils.py."},
]


def tagged(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


class Loop:
    """A runtime over a scripted model and a real workspace, recording every event."""

    def __init__(self, workspace: Path, turns: list[dict[str, Any]], *, native: bool = False):
        (workspace / "utils.py").write_text(BUGGY)
        self.workspace = workspace
        self.executor = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace=workspace)
        self.transport = ScriptedTransport(turns, tools=native)
        self.events: list[ev.LoopEvent] = []
        self.runtime = LocalToolRuntime(
            self.transport, self.executor, model="m", on_event=self.events.append
        )

    def run(self) -> OperatorResponse:
        return self.runtime.run(TASK)

    def injected(self) -> list[ev.FallbackPromptInjected]:
        return [e for e in self.events if isinstance(e, ev.FallbackPromptInjected)]

    def last_message_of_request(self, index: int) -> dict[str, Any]:
        return dict(self.transport.requests[index].messages[-1])

    @property
    def utils(self) -> str:
        return (self.workspace / "utils.py").read_text()


def test_text_only_model_reads_edits_and_finishes_after_approval(tmp_path: Path) -> None:
    write = json.dumps({"name": "write_file", "arguments": {"path": "utils.py", "content": FIXED}})
    loop = Loop(
        tmp_path,
        [
            {"content": "I'll read it first.\n" + tagged("read_file", {"path": "utils.py"})},
            {"content": f"Found it: it subtracts.\n```json\n{write}\n```"},
            {"content": "Fixed: add() now adds."},
        ],
    )
    paused = loop.run()

    assert paused.paused and paused.pending is not None
    assert paused.pending.name == "write_file"
    assert loop.utils == BUGGY, "nothing may change before approval"
    assert paused.protocol == "text-fallback"
    prompt = fallback_prompt(loop.executor.specs())
    assert [e.prompt for e in loop.injected()] == [prompt]
    first = loop.transport.requests[0]
    assert first.tools is None
    assert first.messages[:2] == [TASK[0], {"role": "system", "content": prompt}]
    fed_back = loop.last_message_of_request(1)
    assert fed_back["role"] == "user"
    assert '<tool_response name="read_file" status="result">' in fed_back["content"]
    assert "return a - b" in fed_back["content"]

    done = loop.runtime.approve(paused.pending_state)

    assert done.success and done.text == "Fixed: add() now adds."
    assert loop.utils == FIXED
    assert [(e.name, e.status, e.source) for e in done.events] == [
        ("read_file", "done", "text-fallback"),
        ("write_file", "done", "text-fallback"),
    ]
    assert done.iterations_used == 3 and done.protocol == "text-fallback"
    assert '<tool_response name="write_file" status="result">' in str(
        loop.last_message_of_request(2)["content"]
    )
    assert len(loop.injected()) == 1, "the prompt is injected once, not again on resume"
    assert sum(m.get("content") == prompt for m in done.messages) == 1


def test_a_parse_failure_is_answered_with_the_format_and_costs_an_iteration(
    tmp_path: Path,
) -> None:
    loop = Loop(
        tmp_path,
        [
            {"content": '<tool_call>{"name": "read_file", "arguments": {"path": utils.py}}'},
            {"content": tagged("read_file", {"path": "utils.py"})},
            {"content": "It subtracts."},
        ],
    )
    response = loop.run()

    assert response.success and response.text == "It subtracts."
    assert response.iterations_used == 3
    feedback = loop.last_message_of_request(1)
    assert feedback["role"] == "user"
    assert "not valid JSON" in feedback["content"]
    assert expected_format_hint() in feedback["content"]
    assert [e.name for e in response.events] == ["read_file"]


def test_the_same_failure_twice_trips_the_circuit_breaker(tmp_path: Path) -> None:
    broken = {"content": '<tool_call>{"name": "read_file", "arguments": {"path": x}}</tool_call>'}
    loop = Loop(tmp_path, [broken, broken, {"content": "never reached"}])
    response = loop.run()

    assert not response.success
    assert response.error_kind == "CircuitBreaker"
    assert response.iterations_used == 2
    assert loop.transport.remaining == 1


def test_different_failures_do_not_trip_the_breaker(tmp_path: Path) -> None:
    loop = Loop(
        tmp_path,
        [
            {"content": '<tool_call>{"name": "read_file", "arguments": {"path": x}}</tool_call>'},
            {"content": "<tool_call></tool_call>"},
            {"content": "I give up on tools: add() subtracts."},
        ],
    )
    response = loop.run()

    assert response.success and response.iterations_used == 3


def test_an_unknown_tool_is_answered_with_the_valid_ones(tmp_path: Path) -> None:
    loop = Loop(
        tmp_path,
        [
            {"content": tagged("patch_file", {"path": "utils.py"})},
            {"content": "OK, I will stop."},
        ],
    )
    response = loop.run()

    assert response.success
    feedback = loop.last_message_of_request(1)["content"]
    assert "patch_file" in feedback
    assert ", ".join(sorted(spec.name for spec in loop.executor.specs())) in feedback
    assert response.events == ()


def test_a_native_model_writing_its_call_as_text_is_salvaged(tmp_path: Path) -> None:
    loop = Loop(
        tmp_path,
        [
            {"content": tagged("read_file", {"path": "utils.py"})},
            {"content": "add() subtracts."},
        ],
        native=True,
    )
    response = loop.run()

    assert response.success and response.text == "add() subtracts."
    assert response.protocol == "native"
    assert loop.injected() == []
    assert loop.transport.requests[0].tools is not None
    [event] = response.events
    assert (event.name, event.status, event.source) == ("read_file", "done", "text-fallback")
    assert "return a - b" in loop.last_message_of_request(1)["content"]


def test_a_native_model_showing_an_example_is_not_salvaged(tmp_path: Path) -> None:
    text = 'For example: {"name": "read_file", "arguments": {"path": "utils.py"}}'
    loop = Loop(tmp_path, [{"content": text}], native=True)
    response = loop.run()

    assert response.success and response.text == text
    assert response.events == ()


@pytest.mark.parametrize("native", [False, True], ids=["text-only", "native"])
def test_thinking_is_never_parsed_for_calls(tmp_path: Path, native: bool) -> None:
    call = tagged("write_file", {"path": "utils.py", "content": "oops"})
    loop = Loop(
        tmp_path,
        [
            {"thinking": call, "content": f"<think>{call}</think>add() subtracts."},
        ],
        native=native,
    )
    response = loop.run()

    assert response.success
    assert response.events == ()
    assert response.iterations_used == 1
    assert loop.utils == BUGGY


# --- live ------------------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.timeout(600)
def test_live_text_only_model_runs_through_the_fallback_path(
    tmp_path: Path, live_server: LiveServer
) -> None:
    from rune.transport.openai_compat import OpenAICompatTransport

    transport = OpenAICompatTransport(live_server.base_url, tools=False, read_timeout=240.0)
    model = live_server.model
    (tmp_path / "utils.py").write_text(BUGGY)
    executor = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), workspace=tmp_path)
    seen: list[ev.LoopEvent] = []
    runtime = LocalToolRuntime(
        transport,
        executor,
        model=model,
        max_iterations=3,
        options={"max_tokens": 48, "temperature": 0},
        on_event=seen.append,
    )
    with transport:
        response = runtime.run(TASK)
        for _ in range(3):
            if not response.paused:
                break
            assert (tmp_path / "utils.py").read_text() == BUGGY, "changed before approval"
            response = runtime.approve(response.pending_state)

    injected = [e for e in seen if isinstance(e, ev.FallbackPromptInjected)]
    assert [e.prompt for e in injected] == [fallback_prompt(executor.specs())]
    assert response.protocol == "text-fallback"
    assert 1 <= response.iterations_used <= 3
    assert all(e.source == "text-fallback" for e in response.events)
    if response.success:
        assert isinstance(response.text, str)
    elif not response.paused:
        assert response.error and response.error_kind
