"""No reading tools on the first turn when the whole workspace is in the context
(rune.assists.shown), as the rune command's assists run it against an Ollama server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.ollama_server import FakeModel, FakeOllama, text_reply
from rune.app import assists_for
from rune.assists.shown import READERS
from rune.operator.blocks import SMALL_WORKSPACE_FILES
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.settings.config import Settings
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.ollama import OllamaChatTransport

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
FIX_TASK = "add() in calc.py subtracts. Find the bug and fix it."


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("qwen3:latest", ("completion",))]) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "calc.py").write_text(BROKEN)
    return workspace


def run(ollama: FakeOllama, project: Path, request: str) -> None:
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    transport = OllamaChatTransport(ollama.url, read_timeout=5)
    assists = assists_for(Settings(auto_tests=False), executor)
    loop = LocalToolRuntime(
        transport, executor, model="qwen3", protocol="constrained", assists=assists
    )
    response = loop.run([{"role": "user", "content": request}])
    if response.pending is not None:
        loop.approve(response.pending_state)


def offered(body: dict[str, Any]) -> set[str]:
    """The tools the turn's schema lets the model call."""
    forms = body["format"]["anyOf"]
    return {form["properties"]["tool"]["enum"][0] for form in forms if "tool" in form["properties"]}


def reply(**turn: Any) -> object:
    return text_reply(json.dumps(turn))


def test_the_first_turn_of_a_fix_in_a_small_workspace_offers_no_reading_tools(
    ollama: FakeOllama, project: Path
) -> None:
    fix = {"path": "calc.py", "name": "add", "code": FIXED}
    ollama.script(reply(tool="replace_function", arguments=fix), reply(answer="add() adds."))
    run(ollama, project, FIX_TASK)
    first, second = ollama.bodies()
    assert not offered(first) & READERS and "replace_function" in offered(first)
    assert offered(second) >= READERS
    assert any("answer" in form["properties"] for form in first["format"]["anyOf"])


def test_a_question_keeps_every_tool(ollama: FakeOllama, project: Path) -> None:
    ollama.script(reply(answer="It subtracts b from a."))
    run(ollama, project, "What does calc.py compute?")
    assert offered(ollama.bodies()[0]) >= READERS


def test_a_workspace_too_big_to_show_keeps_every_tool(ollama: FakeOllama, project: Path) -> None:
    for number in range(SMALL_WORKSPACE_FILES + 1):  # more files than a small workspace has
        (project / f"module_{number}.py").write_text(f"VALUE = {number}\n")
    ollama.script(reply(tool="search", arguments={"pattern": "def add"}), reply(answer="Found."))
    run(ollama, project, FIX_TASK)
    assert offered(ollama.bodies()[0]) >= READERS
