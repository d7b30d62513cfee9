"""Drives a scripted three-turn session to the end, resuming whatever the journal holds.

Run by tests/test_kill_resume.py as a real subprocess that is SIGKILLed at random points:
``python kill_resume_driver.py WORKSPACE CALLS_LOG`` with ``RUNE_DATA_DIR`` set. Each start
resumes the latest session; the scripted model continues from the replies the journal holds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rune.messages import ChatResult
from rune.operator import RuneOperator
from rune.sessions import SessionStore
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.scripted import ScriptedTransport

MODEL_DELAY = 0.04


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


USER_TURNS = ["make one", "make two", "fix one"]
SCRIPT: list[dict[str, Any]] = [
    call("read_file", path="seed.txt"),
    call("write_file", path="one.txt", content="1\n"),
    {"content": "made one"},
    call("write_file", path="two.txt", content="2\n"),
    call("read_file", path="two.txt"),
    {"content": "made two"},
    call("write_file", path="one.txt", content="one\n"),
    {"content": "fixed"},
]


class SlowScriptedModel(ScriptedTransport):
    """The script from reply ``first`` on, each call logged and taking a moment, like a model."""

    def __init__(self, first: int, log: Path) -> None:
        super().__init__(SCRIPT[first:])
        self._first = first
        self._log = log

    def chat(self, model: str, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        with self._log.open("a") as log:
            log.write(f"{self._first + len(self.requests)}\n")
        time.sleep(MODEL_DELAY)
        return super().chat(model, messages, **kwargs)


def main(workspace: Path, calls_log: Path) -> None:
    store = SessionStore()
    latest = store.latest()
    session = (
        store.open(latest.id)
        if latest is not None
        else store.create(model="scripted", workspace=str(workspace), backend="scripted")
    )
    with session:
        # The scripted model goes on after the replies the journal holds; those of a pause
        # travel in the pause record (its messages may not be journaled one by one yet).
        pending = session.pending_state
        known = pending["messages"] if pending is not None else session.messages
        replies = sum(1 for m in known if m.get("role") == "assistant")
        executor = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace)
        op = RuneOperator.from_session(SlowScriptedModel(replies, calls_log), executor, session)
        response = op.resume()
        while True:
            while response is not None and response.paused:
                response = op.approve()
            sent = sum(1 for r in session.records if r.kind == "user")
            if sent >= len(USER_TURNS):
                break
            response = op.send(USER_TURNS[sent])
    print("FINISHED", os.getpid())


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
