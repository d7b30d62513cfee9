"""The journal's typed records and the one fold from records to a session's state.

A journal written by Rune before its records were typed (``tests/fixtures/main_journal``, made
by main's code with ``make.py`` there) must still load, show and resume exactly as it did.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fakes.cli import rune
from rune import events as ev
from rune.grants import Grant
from rune.operator import RuneOperator
from rune.pause.state import unseal
from rune.sessions import SessionStore, journal, records
from rune.sessions.fold import ended_status, fold
from rune.sessions.journal import Record
from rune.sessions.sink import JournalSink
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.scripted import ScriptedTransport

FIXTURE = Path(__file__).parent / "fixtures" / "main_journal"
SESSION_ID = (FIXTURE / "session_id").read_text().strip()


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


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


def test_an_old_journal_cut_between_its_pause_and_its_messages_gets_them_back(
    old_data: Path,
) -> None:
    # main's Rune journaled a pause before the messages it carries: a crash in between left
    # the last assistant turn only inside the pause
    path = old_data / "sessions" / SESSION_ID / "journal.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    assert '"kind": "message"' in lines[-1] and '"kind": "pending"' in lines[-2]
    path.write_text("".join(lines[:-1]))
    with SessionStore().open(SESSION_ID) as session:
        assert session.messages[-1]["role"] == "user"
        operator = RuneOperator.from_session(ScriptedTransport([]), ToolExecutor(), session)
        assert operator.history[-1]["tool_calls"][0]["function"]["name"] == "write_file"
        assert session.messages == operator.history
        assert session.status == "pending approval"


@pytest.mark.parametrize(
    "body",
    [
        records.Header("m", "/w", "ollama", "fix it", "2026-01-01T00:00:00.000+00:00"),
        records.UserTurn({"role": "user", "content": "hi"}),
        records.MessageAdded({"role": "assistant", "content": "", "tool_calls": []}),
        records.ToolFinished({"name": "read_file", "arguments": {}, "status": "done"}),
        records.Paused({"rune_pending_state": 3}, records.Shared(1, 2, 3)),
        records.Paused({"rune_pending_state": 3}),
        records.Decided("rejected", "no"),
        records.TurnEnded(success=True, outcome="done", text="ok", evicted=("files",)),
        records.Granted(Grant("command", ("python", "-m", "pytest"))),
    ],
)
def test_every_record_reads_back_as_it_was_written(body: records.JournalRecord) -> None:
    data = json.loads(json.dumps(records.data_of(body)))
    assert records.read(Record(1, records.kind_of(body), "", data)) == body


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("user", {"message": "not a message"}),
        ("message", {}),
        ("tool_event", {"event": [1]}),
        ("pending", {"state": None}),
        ("grant", {"kind": "everything"}),
    ],
)
def test_data_that_does_not_fit_its_kind_reads_as_unreadable(kind: str, data: dict) -> None:
    assert records.read(Record(1, kind, "", data)) == records.Unreadable(kind)


def test_a_turn_end_from_before_outcomes_reads_with_its_status() -> None:
    end = records.read(
        Record(1, "turn_end", "", {"success": False, "error_kind": "IterationLimit"})
    )
    assert isinstance(end, records.TurnEnded)
    assert (end.ended, ended_status(end)) == ("failed", "iteration limit")


def test_the_events_of_a_turn_are_enough_to_rebuild_its_session(tmp_path: Path) -> None:
    # An operator without a session: what it sends its listener, written by a journal sink
    # alone, folds to the conversation the operator holds, its pause and its end.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha\n")
    heard: list[ev.LoopEvent] = []
    transport = ScriptedTransport(
        [
            call("read_file", path="notes.txt"),
            call("write_file", path="out.txt", content="alpha\n"),
            {"content": "Copied."},
        ]
    )
    tools = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace)
    operator = RuneOperator(transport, tools, model="m", on_event=heard.append)
    with SessionStore().create(model="m", workspace=str(workspace), backend="b") as session:
        sink = JournalSink(session)
        sink.write(records.UserTurn({"role": "user", "content": "copy notes.txt"}))
        paused = operator.send("copy notes.txt")
        for event in heard:
            sink(event)
        assert session.status == "pending approval"
        assert session.pending_state == paused.pending_state
        heard.clear()
        sink.write(records.Decided("approved"))
        done = operator.approve()
        for event in heard:
            sink(event)
        state = fold(session.records)
    assert done.success
    assert [dict(m) for m in state.messages] == operator.history
    assert state.status == "done" and state.ended == records.TurnEnded.of(done)
    decided = next(n for n, r in enumerate(session.records) if r.kind == "decision")
    answered = fold(session.records[: decided + 1]).answered
    assert answered is not None and answered.state == paused.pending_state


def test_the_fold_is_the_sessions_state_and_a_pause_keeps_only_what_is_new(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    transport = ScriptedTransport(
        [call("read_file", path="a.txt"), call("write_file", path="a.txt", content="b\n")]
    )
    (workspace / "a.txt").write_text("a\n")
    tools = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace)
    with SessionStore().create(model="m", workspace=str(workspace), backend="b") as session:
        paused = RuneOperator(transport, tools, model="m", session=session).send("change a.txt")
        session_id = session.id
        live = session.state
    contents = SessionStore().read(session_id)
    assert fold(contents.records) == live
    [pause] = [records.read(r) for r in contents.records if r.kind == "pending"]
    assert isinstance(pause, records.Paused) and pause.shared is not None
    # every message and tool event of the pause was journaled before it: none is repeated
    assert pause.state["messages"] == [] and pause.state["events"] == []
    assert live.waiting is not None and live.waiting.state == paused.pending_state


def test_the_records_that_change_a_sessions_state_are_the_kinds_a_listing_looks_for() -> None:
    # The listing reads only the first bytes of a line (journal.STATE_KINDS); the fold reads
    # the typed records (records.STATE_RECORDS): both must agree on which records matter.
    examples = [
        records.Header(),
        records.UserTurn({}),
        records.Paused({}),
        records.Decided("approved"),
        records.TurnEnded(success=True),
    ]
    assert {type(body) for body in examples} == set(records.STATE_RECORDS)
    assert {records.kind_of(body) for body in examples} == journal.STATE_KINDS
