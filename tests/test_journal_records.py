"""The journal's typed records and the one fold from records to a session's state.

A journal written by Rune before its records were typed (``tests/fixtures/main_journal``, made
by main's code with ``make.py`` there) must still load, show and resume exactly as it did.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fakes.cli import rune
from rune.operator import RuneOperator
from rune.sessions import SessionStore
from rune.state import unseal
from rune.tool_executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.scripted import ScriptedTransport

FIXTURE = Path(__file__).parent / "fixtures" / "main_journal"
SESSION_ID = (FIXTURE / "session_id").read_text().strip()


@pytest.fixture
def old_data(tmp_path: Path) -> Path:
    """A data directory holding the session main's Rune wrote, and the key it sealed with."""
    data = Path(os.environ["RUNE_DATA_DIR"])
    directory = data / "sessions" / SESSION_ID
    directory.mkdir(parents=True)
    shutil.copy(FIXTURE / "journal.jsonl", directory / "journal.jsonl")
    shutil.copy(FIXTURE / "approval.key", data / "approval.key")
    os.chmod(data / "approval.key", 0o600)
    return data


def test_an_old_journal_opens_with_its_conversation_and_its_pause(old_data: Path) -> None:
    with SessionStore().open(SESSION_ID) as session:
        assert session.status == "pending approval"
        assert [m["role"] for m in session.messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        assert session.turn_starts == [0, 6]
        state = session.pending_state
        assert state is not None
        key = (old_data / "approval.key").read_bytes()
        pause = unseal(state, lambda: key)
        assert pause.request.arguments == {"path": "second.txt", "content": "two\n"}
    [summary] = SessionStore().list()
    assert (summary.status, summary.title, summary.model) == ("pending approval", "t", "m")


def test_an_old_journal_resumes_its_pause_and_goes_on_after_a_rejection(
    old_data: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tools = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace)
    transport = ScriptedTransport([{"content": "Left second.txt alone."}])
    with SessionStore().open(SESSION_ID) as session:
        operator = RuneOperator.from_session(transport, tools, session)
        paused = operator.resume()
        assert paused is not None and paused.pending is not None
        assert paused.pending.arguments == {"path": "second.txt", "content": "two\n"}
        answer = operator.reject("not now")
        assert answer.success and answer.text == "Left second.txt alone."
        assert session.status == "incomplete"  # the change it asked for was rejected
    sent = transport.requests[0].messages
    assert sent[-1]["content"] == "rejected by the operator: not now"
    with SessionStore().open(SESSION_ID) as again:
        assert again.messages[-1] == {"role": "assistant", "content": "Left second.txt alone."}


def test_sessions_show_prints_an_old_journal_as_it_did(old_data: Path, home: Path) -> None:
    shown = rune(home, "sessions", "show", SESSION_ID)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (FIXTURE / "show.txt").read_text()
