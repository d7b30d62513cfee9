"""A reply cut off (a loop the repetition guard stopped, or the output cap) is asked again,
sampled, instead of being sent back to the model (rune.assists.reask), on the real wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes.openai_server import FakeOpenAIServer, text_reply

from rune import events as ev
from rune.assists import standard_assists
from rune.assists.reask import FIRST_SEED, MAX_REASKS, TEMPERATURE
from rune.messages import OperatorResponse
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.openai_compat import OpenAICompatTransport
from rune.transport.repetition import RepetitionGuard

LOOPING = [
    '{"tool": "write_file", "arguments": {"path": "days.py", "content": "from datetime import ',
    *["weekday, isoweekday, "] * 80,
]
WRITE = json.dumps(
    {"tool": "write_file", "arguments": {"path": "days.py", "content": "DAYS = 5\n"}}
)
ANSWER = json.dumps({"answer": "days.py holds DAYS."})
TASK = [{"role": "user", "content": "Write days.py with DAYS = 5."}]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def runtime_for(
    server: FakeOpenAIServer,
    ws: Path,
    *,
    reask: bool = True,
    seen: list[ev.LoopEvent] | None = None,
) -> LocalToolRuntime:
    transport = RepetitionGuard(OpenAICompatTransport(server.base_url, read_timeout=5))
    executor = ToolExecutor(SandboxPolicy.workspace_only(ws), ws)
    return LocalToolRuntime(
        transport,
        executor,
        model="m",
        protocol="constrained",
        options={"temperature": 0, "num_predict": 1024},
        assists=standard_assists(reask=reask),
        on_event=None if seen is None else seen.append,
    )


def approved(runtime: LocalToolRuntime, response: OperatorResponse) -> OperatorResponse:
    while response.pending is not None:
        response = runtime.approve(response.pending_state)
    return response


def test_a_looping_reply_is_asked_again_and_the_new_one_is_read(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    seen: list[ev.LoopEvent] = []
    server.script(text_reply(*LOOPING), text_reply(WRITE), text_reply(ANSWER))
    runtime = runtime_for(server, tmp_path, seen=seen)
    response = approved(runtime, runtime.run(list(TASK)))
    assert response.success and response.text == "days.py holds DAYS."
    assert (tmp_path / "days.py").read_text() == "DAYS = 5\n"
    first, again, after = server.chat_bodies
    # the same request, sampled with a seed of its own
    assert again["messages"] == first["messages"]
    assert again["temperature"] == TEMPERATURE and again["seed"] == FIRST_SEED
    assert first["temperature"] == 0 and "seed" not in first
    assert again["max_tokens"] == first["max_tokens"] == 1024
    # the looping reply is nowhere in what the model reads next
    assert "isoweekday" not in json.dumps(after["messages"])
    assert after["temperature"] == 0  # the loop's own calls stay greedy
    assert any("repeated itself" in w for w in response.warnings)
    assert any("asked again" in w for w in response.warnings)
    assert [e for e in seen if isinstance(e, ev.AssistModelCall)] == [
        ev.AssistModelCall("reask", 1)
    ]


def test_a_run_asks_again_at_most_max_reasks_times(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    cut = [text_reply(*LOOPING)] * (MAX_REASKS + 1)
    server.script(*cut, text_reply(ANSWER))
    runtime = runtime_for(server, tmp_path)
    response = runtime.run(list(TASK))
    bodies = server.chat_bodies
    assert len(bodies) == MAX_REASKS + 2
    sampled = [b for b in bodies if b.get("temperature") == TEMPERATURE]
    assert [b["seed"] for b in sampled] == [FIRST_SEED + k for k in range(MAX_REASKS)]
    # the last cut reply went back to the model as unusable, and its answer ended the run
    assert bodies[-1]["messages"][-1]["content"].startswith("Your reply could not be used")
    assert response.success and response.text == "days.py holds DAYS."


def test_one_turn_asks_again_until_a_reply_is_not_cut(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    server.script(text_reply(*LOOPING), text_reply(*LOOPING), text_reply(WRITE), text_reply(ANSWER))
    runtime = runtime_for(server, tmp_path)
    response = approved(runtime, runtime.run(list(TASK)))
    assert response.success and (tmp_path / "days.py").read_text() == "DAYS = 5\n"
    assert [b.get("seed") for b in server.chat_bodies] == [None, FIRST_SEED, FIRST_SEED + 1, None]
    assert response.iterations_used == 2  # the re-asks belong to the step they replace


def test_a_reply_that_is_not_cut_is_read_as_it_is(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.script(text_reply(ANSWER))
    response = runtime_for(server, tmp_path).run(list(TASK))
    assert response.success and len(server.chat_bodies) == 1


def test_a_reply_cut_at_the_cap_is_asked_again_too(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    half = WRITE[: len(WRITE) // 2]
    server.script(text_reply(half, finish_reason="length"), text_reply(ANSWER))
    response = runtime_for(server, tmp_path).run(list(TASK))
    assert response.success and response.text == "days.py holds DAYS."
    assert server.chat_bodies[1]["seed"] == FIRST_SEED


def test_without_the_assist_the_cut_reply_goes_back_as_unusable(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    server.script(text_reply(*LOOPING), text_reply(ANSWER))
    response = runtime_for(server, tmp_path, reask=False).run(list(TASK))
    assert response.success
    fed_back = server.chat_bodies[1]["messages"][-1]["content"]
    assert fed_back.startswith("Your reply could not be used")


def test_the_rune_command_asks_again(tmp_path: Path) -> None:
    from rune.app import assists_for
    from rune.settings.config import Settings

    executor = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path)
    names = [a.name for a in assists_for(Settings(), executor)]
    assert "reask" in names
