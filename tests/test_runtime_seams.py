"""The loop's seams: a protocol and an assist written here, in this file alone, run through
``rune.runtime.Runner`` against a fake Ollama over real HTTP; the budget counts what the
protocol sends; the assists' state survives a sealed pause, also in the old form."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fakes.ollama_server import FakeOllama, text_reply, tool_call, tool_reply
from rune import events as ev
from rune.calls import tool_request
from rune.errors import InvalidPendingState
from rune.messages import ChatResult, Message, ToolRequest, ToolStatus
from rune.operator.budget import ContextBudget
from rune.pause import seal
from rune.pause.state import LoopState, PendingState, unseal
from rune.runtime.assist import Assist, Loop
from rune.runtime.chat import ChatRequest
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.runtime.protocol import Turn, Unusable, unanswered_calls
from rune.runtime.runner import Runner
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange
from rune.transport.base import DeltaSink
from rune.transport.ollama import OllamaChatTransport

KEY = b"k" * 32
USER = [{"role": "user", "content": "What does calc.py hold?"}]
SOURCE = "def add(a, b):\n    return a - b\n"
CALL = re.compile(r"^CALL (\w+) (\{.*\})$")


class LineProtocol:
    """A toy protocol: ``CALL name {json}`` on a line of its own calls, anything else answers;
    results come back as ``RESULT name (ok|error): text``."""

    name = "lines"
    withholds_answer = False
    answer_schema = False

    def __init__(self, tools: Sequence[str]) -> None:
        self.tools = frozenset(tools)

    def prompt(self) -> str | None:
        return "Call a tool with a line: CALL <name> <json arguments>. Tools: " + ", ".join(
            sorted(self.tools)
        )

    def request(
        self,
        messages: Sequence[Message],
        *,
        think: bool | None,
        options: Mapping[str, Any] | None,
        sink: DeltaSink,
        answer: bool,
    ) -> ChatRequest:
        stop = {**(options or {}), "stop": ["\n\n"]}
        return ChatRequest(messages, think=think, options=stop, on_delta=sink)

    def calls_in(self, content: str) -> list[ToolRequest]:
        found = [CALL.match(line) for line in content.splitlines()]
        return [
            tool_request(m[1], json.loads(m[2]), None, "text-fallback")
            for m in found
            if m is not None and m[1] in self.tools
        ]

    def read_turn(self, result: ChatResult) -> Turn:
        content = str(result.message.get("content") or "")
        message: Message = {"role": "assistant", "content": content}
        calls = self.calls_in(content)
        if calls:
            return Turn(message, calls=calls)
        if content.startswith("CALL"):
            unusable = Unusable("Write CALL <name> <json>.", "line", "<bad line>" + content)
            return Turn(message, unusable=unusable)
        return Turn(message, answer=content)

    def result_message(self, request: ToolRequest, content: str, *, ok: bool) -> Message:
        verdict = "ok" if ok else "error"
        return {"role": "user", "content": f"RESULT {request.name} ({verdict}): {content}"}

    def turn_message(self, call: ToolRequest) -> Message | None:
        return None

    def unanswered_calls(self, history: Sequence[Message]) -> list[ToolRequest]:
        return unanswered_calls(history, "ollama-native", self.calls_in)


class CountingAssist(Assist):
    """A toy assist: numbers each tool result, and sends the first answer back once."""

    name = "counting"

    def after_result(
        self, loop: Loop, state: LoopState, request: ToolRequest, status: ToolStatus
    ) -> str:
        memory = self.memory(state)
        memory["results"] = memory.get("results", 0) + 1
        return f"\n(result {memory['results']} of this run)"

    def before_answer(self, loop: Loop, state: LoopState) -> str | None:
        if self.recalled(state).get("asked"):
            return None
        self.memory(state)["asked"] = True
        return "Are you sure? Say it again."


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(SOURCE)
    return tmp_path


def executor(project: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(project), project)


def test_a_protocol_and_an_assist_of_the_callers_own_run_through_the_loop(
    ollama: FakeOllama, project: Path
) -> None:
    ollama.script(
        text_reply('CALL read_file {"path": "calc.py"}'),
        text_reply("CALL read_file {broken"),
        text_reply("It subtracts."),
        text_reply("It subtracts b from a."),
    )
    tools = executor(project)
    seen: list[ev.LoopEvent] = []
    runner = Runner(
        OllamaChatTransport(ollama.url, read_timeout=10),
        tools,
        model="qwen3",
        protocol=LineProtocol([s.name for s in tools.specs()]),
        assists=[CountingAssist()],
        on_event=seen.append,
        seal_key=KEY,
    )
    response = runner.run(USER)
    assert response.success, response.error
    assert response.text == "It subtracts b from a."
    assert response.protocol == "lines" and response.iterations_used == 4
    assert [(e.name, e.status, e.source) for e in response.events] == [
        ("read_file", "done", "text-fallback")
    ]
    first, second, third, fourth = ollama.bodies()
    # the protocol's prompt ahead of the conversation, its options, and no tool schemas
    assert first["messages"][0]["content"].startswith("Call a tool with a line: CALL")
    for body in (first, second):
        assert "tools" not in body and body["options"]["stop"] == ["\n\n"]
    # the protocol answers the call, the assist adds to the result
    result = second["messages"][-1]
    assert result["role"] == "user"
    assert result["content"].startswith("RESULT read_file (ok): ")
    assert "return a - b" in result["content"]
    assert result["content"].endswith("\n(result 1 of this run)")
    # a reply the protocol cannot use: the model hears the protocol's words
    assert third["messages"][-1] == {"role": "user", "content": "Write CALL <name> <json>."}
    # the assist sent the first answer back, once
    assert fourth["messages"][-1] == {"role": "user", "content": "Are you sure? Say it again."}
    injected = [e for e in seen if isinstance(e, ev.FallbackPromptInjected)]
    assert [e.protocol for e in injected] == ["lines"]


def test_an_assists_state_travels_sealed_through_a_pause(ollama: FakeOllama, project: Path) -> None:
    fix = {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}
    ollama.script(
        tool_reply(tool_call("read_file", {"path": "calc.py"}, id="call_read0001")),
        tool_reply(tool_call("write_file", fix, id="call_write001")),
        text_reply("Fixed."),
        text_reply("Fixed, sure."),
    )

    def runner() -> Runner:
        return Runner(
            OllamaChatTransport(ollama.url, read_timeout=10),
            executor(project),
            model="qwen3",
            assists=[CountingAssist()],
            seal_key=KEY,
        )

    paused = runner().run([{"role": "user", "content": "Fix calc.py."}])
    assert paused.paused and paused.pending_state is not None
    assert paused.pending_state["assists"] == {"counting": {"results": 1}}
    # another process: a new runner, the state through JSON
    done = runner().approve(json.loads(json.dumps(paused.pending_state)))
    assert done.success and done.text == "Fixed, sure."
    results = [m["content"] for m in done.messages if m["role"] == "tool"]
    assert [r.rsplit("\n", 1)[-1] for r in results] == [
        "(result 1 of this run)",
        "(result 2 of this run)",
    ]


# --- the budget counts what the protocol sends --------------------------------------------


@pytest.mark.parametrize(("protocol", "counted"), [("native", True), ("text", False)])
def test_the_budget_counts_the_tool_schemas_only_when_they_are_sent_beside_the_prompt(
    ollama: FakeOllama, project: Path, protocol: str, counted: bool
) -> None:
    ollama.script(text_reply("Nothing to do."))
    transport = OllamaChatTransport(ollama.url, read_timeout=10)
    tools = executor(project)
    budget = ContextBudget(transport, tools=[s.schema() for s in tools.specs()])
    schemas_alone = budget.estimate([])
    assert schemas_alone > 0  # what the budget counts for the schemas before any request
    runtime = LocalToolRuntime(
        transport, tools, model="qwen3", protocol=protocol, shaper=budget, seal_key=KEY
    )
    assert runtime.run(USER).success
    sent_tools = "tools" in ollama.bodies()[0]
    assert sent_tools is counted
    # the text protocol's prompt holds the schemas already: counted once, in the messages
    without_tools = ContextBudget(transport).estimate([])
    assert budget.estimate([]) == (schemas_alone if counted else without_tools)


# --- the assists' state in the sealed pending state ---------------------------------------


def _paused_state() -> PendingState:
    request = tool_request("write_file", {"path": "a.py", "content": "x"})
    loop = LoopState(messages=[{"role": "user", "content": "go"}], protocol="native")
    loop.queue = [request]
    loop.assists = {"nudge": {"nudged": True}, "repair": {"repairs": 1}, "check": {}}
    change = PreparedChange("write_file", {"path": "a.py", "content": "x"}, "writes a.py", "+x")
    return PendingState.of(loop, model="m", iteration_budget=8, change=change)


def test_the_assists_state_is_sealed_with_the_pause_and_comes_back() -> None:
    sealed = _paused_state().sealed(KEY).to_json()
    assert sealed["assists"] == {"nudge": {"nudged": True}, "repair": {"repairs": 1}}
    resumed = unseal(json.loads(json.dumps(sealed)), lambda: KEY).loop_state()
    assert resumed.assists == {"nudge": {"nudged": True}, "repair": {"repairs": 1}}
    resumed.assists["nudge"]["nudged"] = False  # the loop's copy is its own, and mutable


def test_a_state_sealed_before_assists_had_a_namespace_loads_into_theirs() -> None:
    # As Rune wrote a version 3 state before: two fields of their own, no "assists".
    old: dict[str, Any] = _paused_state().to_json()
    del old["assists"]
    old.update(nudged=True, repairs=1)
    old[seal.SEAL_FIELD] = ""
    old[seal.SEAL_FIELD] = seal.sign(old, KEY)
    resumed = unseal(old, lambda: KEY).loop_state()
    assert resumed.assists == {"nudge": {"nudged": True}, "repair": {"repairs": 1}}


@pytest.mark.parametrize("assists", [["nudge"], {"nudge": True}, "x"])
def test_a_damaged_assists_field_is_refused_as_a_damaged_state(assists: object) -> None:
    data: dict[str, Any] = _paused_state().to_json()
    data["assists"] = assists
    data[seal.SEAL_FIELD] = ""
    data[seal.SEAL_FIELD] = seal.sign(data, KEY)
    with pytest.raises(InvalidPendingState, match="damaged"):
        unseal(data, lambda: KEY)
