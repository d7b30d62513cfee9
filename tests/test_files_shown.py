"""A conversation's first turn acts on the files its context shows (rune.assists.shown):
the real ``rune`` command against a fake llama-server, the constrained protocol's schema read
off the wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import rune
from tests.fakes.openai_server import FakeOpenAIServer, Reply, text_reply

from rune.assists.shown import LOOK_TOOLS
from rune.cli import EXIT_OK
from rune.operator.blocks import WALK_LIMIT

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TASK = "add() in calc.py subtracts. Find the bug and fix it."


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def workspace(home: Path) -> Path:
    path = home / "work"
    path.mkdir()
    (path / "calc.py").write_text(BROKEN, encoding="utf-8")
    return path


def turn(**fields: Any) -> Reply:
    """One constrained turn, as the grammar makes the model write it."""
    return text_reply(json.dumps(fields))


def offered(body: dict[str, Any]) -> set[str]:
    """The tools a request's response schema lets the turn call."""
    forms = body["response_format"]["json_schema"]["schema"]["anyOf"]
    return {f["properties"]["tool"]["enum"][0] for f in forms if "tool" in f["properties"]}


def run(home: Path, workspace: Path, server: FakeOpenAIServer, task: str) -> Any:
    url = server.base_url + "/v1"
    args = ["--protocol", "constrained", "--workspace", str(workspace), "--yes", "--yes"]
    return rune(home, "run", "--backend", url, *args, task, env={"RUNE_AUTO_TESTS": "false"})


@pytest.mark.bwrap  # the model's check runs contained
def test_the_first_turn_acts_on_a_shown_workspace_and_the_next_may_look(
    home: Path, workspace: Path, server: FakeOpenAIServer
) -> None:
    server.script(
        turn(tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": FIXED}),
        turn(tool="run_python", arguments={"code": "from calc import add\nassert add(2, 3) == 5"}),
    )
    done = run(home, workspace, server, TASK)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    first, second = (offered(body) for body in server.chat_bodies)
    assert not first & LOOK_TOOLS and {"replace_function", "run_python"} <= first, first
    assert second >= LOOK_TOOLS, second
    assert "Files in the workspace" in server.chat_bodies[0]["messages"][0]["content"]
    assert (workspace / "calc.py").read_text() == FIXED


def test_a_workspace_too_big_to_show_may_be_looked_at_from_the_first_turn(
    home: Path, workspace: Path, server: FakeOpenAIServer
) -> None:
    for n in range(WALK_LIMIT + 1):
        (workspace / f"mod_{n}.py").write_text(f"VALUE = {n}\n")
    server.script(turn(answer="calc.py holds add()."))
    done = run(home, workspace, server, "What does calc.py hold?")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    (body,) = server.chat_bodies
    assert offered(body) >= LOOK_TOOLS
    shown = body["messages"][0]["content"]
    assert BROKEN in shown and "VALUE = 0" not in shown  # the file the task names, not the rest
