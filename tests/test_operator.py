"""RuneOperator: context blocks, multi-turn budgets, num_ctx, eviction, journaled approvals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rune.errors import ApprovalError, InvalidPendingState
from rune.operator import RuneOperator
from rune.operator.blocks import PROJECT_BUCKET, TOOLS_BUCKET, Workspace
from rune.sessions import SessionStore
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange, ToolSpec
from rune.transport.scripted import ScriptedTransport

GUIDANCE = [
    "Use tools for every file/command action; never fabricate tool output.",
    "Read before editing; verify fixes by running them.",
]


def call(name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n")
    return ws


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SessionStore:
    monkeypatch.setenv("RUNE_DATA_DIR", str(tmp_path / "data"))
    return SessionStore()


def executor(ws: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(ws), ws)


def test_the_tools_block_lists_every_tool_and_ends_with_the_guidance(workspace: Path) -> None:
    tools = executor(workspace)
    op = RuneOperator(ScriptedTransport([]), tools, model="m")
    block = op._contributor_tools()
    assert (block.name, block.bucket, block.evictable) == ("tools", TOOLS_BUCKET, False)
    lines = block.text.splitlines()
    assert lines[-2:] == GUIDANCE
    for spec in tools.specs():
        assert f"- {spec.name}: {spec.description.strip().splitlines()[0]}" in lines
    assert block in op.context_blocks()


def test_project_instructions_come_from_agents_md_and_rune_md(workspace: Path) -> None:
    transport = ScriptedTransport([{"content": "ok"}])
    op = RuneOperator(transport, executor(workspace), model="m")
    assert all(b.name != "project" for b in op.context_blocks())
    (workspace / "AGENTS.md").write_text("Run the tests with `make check`.\n")
    (workspace / "RUNE.md").write_text("Never touch vendor/.\n")
    [project] = [b for b in op.context_blocks() if b.name == "project"]
    assert (project.bucket, project.evictable) == (PROJECT_BUCKET, True)
    op.send("hi")
    system = transport.requests[0].messages[0]
    assert system["role"] == "system"
    assert "Run the tests with `make check`." in system["content"]
    assert "Never touch vendor/." in system["content"]
    assert f"Workspace (relative paths start here): {workspace}" in system["content"]
    # the workspace's path is said once; the roots name it by its role
    assert system["content"].count(str(workspace)) == 1
    assert "- You may write (after approval) under: the workspace\n" in system["content"]


def test_the_part_every_run_shares_comes_first_and_the_workspace_after_it(
    workspace: Path,
) -> None:
    # The prompt cache keeps what two runs share (rune.transport.prompt_cache): the lasting
    # blocks and the protocol's prompt must come before anything about the workspace.
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    firsts = []
    for _ in range(2):
        transport = ScriptedTransport([{"content": '{"answer": "ok"}'}])
        op = RuneOperator(transport, executor(workspace), model="m", protocol="constrained")
        op.send("fix calc.py")
        firsts.append(str(transport.requests[0].messages[0]["content"]))
        (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    text = firsts[0]
    assert text.index("Reply with exactly one JSON object") < text.index("Environment:")
    assert text.index("Environment:") < text.index("calc.py")
    shared = next(i for i, (a, b) in enumerate(zip(*firsts, strict=False)) if a != b)
    assert shared >= text.index("Environment:") and shared < len(text)


def test_project_instructions_outside_the_sandbox_are_not_read(
    workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("TOP SECRET")
    (workspace / "AGENTS.md").symlink_to(secret)
    warnings: list[str] = []
    op = RuneOperator(
        ScriptedTransport([]),
        executor(workspace),
        model="m",
        on_event=lambda e: warnings.append(getattr(e, "message", "")),
    )
    assert all("TOP SECRET" not in b.text for b in op.context_blocks())
    assert any("AGENTS.md was not read" in w for w in warnings)


def test_each_turn_has_its_own_iteration_budget(workspace: Path) -> None:
    transport = ScriptedTransport(
        [
            call("read_file", path="notes.txt"),
            {"content": "first answer"},
            call("read_file", path="notes.txt"),
            {"content": "second answer"},
        ]
    )
    op = RuneOperator(transport, executor(workspace), model="m", max_iterations=2)
    first = op.send("read it")
    second = op.send("read it again")
    assert (first.success, first.text, first.budget_label) == (True, "first answer", "step 2/2")
    assert (second.success, second.text, second.budget_label) == (
        True,
        "second answer",
        "step 2/2",
    )
    roles = [m["role"] for m in op.history]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2
    # the second turn's model sees the first turn
    assert transport.requests[2].messages[1:5] == op.history[:4]


def test_every_request_carries_num_ctx_and_the_prompt_only_grows_within_a_turn(
    workspace: Path,
) -> None:
    transport = ScriptedTransport(
        [
            call("read_file", path="notes.txt"),
            call("read_file", path="notes.txt", offset=2),
            {"content": "done"},
        ],
        context_length=6144,
    )
    op = RuneOperator(transport, executor(workspace), model="m")
    assert op.send("look").success
    assert [r.options for r in transport.requests] == [{"num_ctx": 6144}] * 3
    for before, after in zip(transport.requests, transport.requests[1:], strict=False):
        assert after.messages[: len(before.messages)] == before.messages


def test_old_tool_output_is_evicted_with_a_note_and_reported(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * 12_000)
    transport = ScriptedTransport(
        [call("read_file", path="big.txt"), {"content": "read"}, {"content": "second"}],
        context_length=4096,
    )
    op = RuneOperator(transport, executor(workspace), model="m", reserve_output_tokens=512)
    # Too big for the window even alone: this turn's result is cut to fit, with a note.
    first = op.send("read big.txt")
    assert first.success
    assert any(" output cut to " in e for e in first.evicted)
    sent_first = [m for m in transport.requests[1].messages if m["role"] == "tool"]
    assert "Rune cut this tool output" in sent_first[0]["content"]
    second = op.send("and now?")
    assert second.success
    assert any(e.startswith('read_file {"path":"big.txt"} output') for e in second.evicted)
    sent_tool = [m for m in transport.requests[-1].messages if m["role"] == "tool"]
    assert sent_tool[0]["content"].startswith("[Rune elided this tool output")
    # the conversation itself keeps the output; only the request was shaped
    assert "x" * 1000 in next(m for m in op.history if m["role"] == "tool")["content"]


def test_a_turn_that_cannot_fit_fails_typed_and_is_never_sent(workspace: Path) -> None:
    transport = ScriptedTransport([{"content": "never"}], context_length=2048)
    op = RuneOperator(transport, executor(workspace), model="m", reserve_output_tokens=256)
    response = op.send("y" * 20_000)
    assert not response.success
    assert response.error_kind == "ContextOverflow"
    assert transport.requests == []


def test_approve_and_send_refuse_the_wrong_moment(workspace: Path) -> None:
    transport = ScriptedTransport([call("write_file", path="new.txt", content="n\n")])
    op = RuneOperator(transport, executor(workspace), model="m")
    with pytest.raises(InvalidPendingState):
        op.approve()
    assert op.send("write").paused
    with pytest.raises(ApprovalError, match="waiting for approval"):
        op.send("something else")


def test_the_journal_holds_every_message_event_and_decision(
    workspace: Path, store: SessionStore
) -> None:
    transport = ScriptedTransport(
        [
            call("read_file", path="notes.txt"),
            call("write_file", path="out.txt", content="out\n"),
            {"content": "written"},
        ]
    )
    session = store.create(model="m", workspace=str(workspace), backend="scripted")
    op = RuneOperator(transport, executor(workspace), model="m", session=session)
    paused = op.send("copy")
    assert session.status == "pending approval"
    assert session.pending_state == paused.pending_state
    done = op.approve()
    assert done.success
    kinds = [r.kind for r in session.records]
    assert kinds[:2] == ["session", "user"]
    assert kinds.count("tool_event") == 2
    assert kinds.index("pending") < kinds.index("decision") < kinds.index("turn_end")
    assert session.messages == op.history
    events = [r.data["event"] for r in session.records if r.kind == "tool_event"]
    assert [(e["name"], e["status"]) for e in events] == [
        ("read_file", "done"),
        ("write_file", "done"),
    ]
    session.close()


APPROVER = """
import json, sys
from pathlib import Path
from rune.operator import RuneOperator
from rune.sessions import SessionStore
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange, ToolSpec
from rune.transport.scripted import ScriptedTransport

ws = Path(sys.argv[1])
store = SessionStore()
listed = [(s.id, s.status) for s in store.list()]
summary = store.latest(status="pending approval")
with store.open(summary.id) as session:
    op = RuneOperator.from_session(
        ScriptedTransport([{"content": "all done"}]),
        ToolExecutor(SandboxPolicy.workspace_only(ws), ws),
        session,
    )
    shown = op.resume()
    result = op.approve()
    print(json.dumps({
        "listed": listed,
        "preview": shown.pending.preview,
        "summary": shown.pending.summary,
        "success": result.success,
        "text": result.text,
        "error_kind": result.error_kind,
        "status": session.status,
    }))
"""


def approve_in_new_process(workspace: Path, data: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", APPROVER, str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUNE_DATA_DIR": str(data)},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def start_paused_session(workspace: Path, store: SessionStore) -> tuple[str, str]:
    transport = ScriptedTransport([call("write_file", path="out.txt", content="approved\n")])
    with store.create(model="m", workspace=str(workspace), backend="scripted") as session:
        paused = RuneOperator(transport, executor(workspace), model="m", session=session).send(
            "write out.txt"
        )
        assert paused.paused
        return session.id, paused.pending.preview


def test_a_new_process_lists_shows_and_approves_the_pending_change(
    workspace: Path, store: SessionStore, tmp_path: Path
) -> None:
    session_id, preview = start_paused_session(workspace, store)
    assert not (workspace / "out.txt").exists()
    seen = approve_in_new_process(workspace, tmp_path / "data")
    assert seen["listed"] == [[session_id, "pending approval"]]
    assert seen["preview"] == preview
    assert (seen["success"], seen["text"], seen["status"]) == (True, "all done", "done")
    assert (workspace / "out.txt").read_text() == "approved\n"


def test_an_altered_pending_change_is_refused_in_the_new_process(
    workspace: Path, store: SessionStore, tmp_path: Path
) -> None:
    session_id, _ = start_paused_session(workspace, store)
    journal = store.root / session_id / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    [pending] = [r for r in records if r["kind"] == "pending"]
    # someone edits the request waiting for approval, after the user saw the preview
    pending["data"]["state"]["queue"][0]["arguments"]["content"] = "evil\n"
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    seen = approve_in_new_process(workspace, tmp_path / "data")
    assert (seen["success"], seen["error_kind"]) == (False, "ApprovalMismatch")
    assert not (workspace / "out.txt").exists()


def test_an_approval_interrupted_before_it_finished_is_asked_again_not_replayed(
    workspace: Path, store: SessionStore
) -> None:
    transport = ScriptedTransport(
        [call("run_command", command="echo ran >> log.txt"), {"content": "done"}]
    )
    with store.create(model="m", workspace=str(workspace), backend="scripted") as session:
        op = RuneOperator(transport, executor(workspace), model="m", session=session)
        paused = op.send("log it")
        assert paused.paused
        session.append("decision", {"decision": "approved", "reason": ""})  # then: a crash
        session_id = session.id
    for _ in range(2):  # asked again, approved again, crashed again: still the same question
        with store.open(session_id) as session:
            warnings: list[object] = []
            resumed = RuneOperator.from_session(
                transport, executor(workspace), session, on_event=warnings.append
            ).resume()
            assert resumed is not None and resumed.paused
            assert resumed.pending is not None
            assert resumed.pending.preview == paused.pending.preview
            assert not (workspace / "log.txt").exists()  # nothing ran without a fresh approval
            assert any("may have been applied already" in str(w) for w in warnings)
            session.append("decision", {"decision": "approved", "reason": ""})


def test_the_resumed_view_is_the_change_that_approve_would_apply(
    workspace: Path, store: SessionStore
) -> None:
    session_id, preview = start_paused_session(workspace, store)
    journal = store.root / session_id / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    [pending] = [r for r in records if r["kind"] == "pending"]
    pending["data"]["pending"] = {"name": "read_file", "arguments": {}, "summary": "harmless",
                                  "preview": "nothing to see", "contained": None}  # fmt: skip
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    with store.open(session_id) as session:
        op = RuneOperator.from_session(ScriptedTransport([]), executor(workspace), session)
        assert op.pending is not None
        assert (op.pending.name, op.pending.preview) == ("write_file", preview)


def test_a_lone_surrogate_from_the_model_is_a_tool_error_and_journals_fine(
    workspace: Path, store: SessionStore
) -> None:
    arguments = '{"path": "a.txt", "content": "x\\ud800y"}'  # valid JSON, invalid Unicode
    reply = f'<tool_call>{{"name": "write_file", "arguments": {arguments}}}</tool_call>'
    turns = [{"content": reply}, {"content": "sorry"}, {"content": "sorry, I cannot"}]
    transport = ScriptedTransport(turns, tools=False)
    with store.create(model="m", workspace=str(workspace), backend="scripted") as session:
        response = RuneOperator(transport, executor(workspace), model="m", session=session).send(
            "write a.txt"
        )
        session_id = session.id
    assert response.success and response.text == "sorry, I cannot"
    assert response.events[0].status == "failed"
    assert "surrogate" in (response.events[0].error or "")
    assert not (workspace / "a.txt").exists()
    with store.open(session_id) as session:
        # the model answered, but the change it asked for was never made
        assert session.warnings == [] and session.status == "incomplete"


class _BareTools:
    """Tools with no workspace of their own (as a library caller may write them)."""

    def specs(self) -> list[ToolSpec]:
        return []

    def is_mutating(self, name: str) -> bool:
        return False

    def run(self, name: str, arguments: object) -> str:
        raise AssertionError("not called")

    def prepare(self, name: str, arguments: object) -> PreparedChange:
        raise AssertionError("not called")

    def apply(self, change: PreparedChange) -> str:
        raise AssertionError("not called")


def test_the_workspace_blocks_describe_the_workspace_value_given(workspace: Path) -> None:
    bare = RuneOperator(ScriptedTransport([]), _BareTools(), model="m")
    assert bare.workspace is None
    assert {b.name for b in bare.context_blocks()} == {"system", "tools"}
    probes: list[str] = []

    def contained() -> bool:
        probes.append("bwrap")
        return True

    given = Workspace(workspace, SandboxPolicy.workspace_only(workspace), contained)
    op = RuneOperator(ScriptedTransport([]), _BareTools(), model="m", workspace=given)
    for _ in range(2):
        blocks = {b.name: b for b in op.context_blocks()}
        assert f"Workspace (relative paths start here): {workspace}" in blocks["environment"].text
        assert "notes.txt" in blocks["files"].text
    assert probes == ["bwrap"]  # asked once per workspace value, when a block first needs it
    # a confined executor gives its own
    confined = RuneOperator(ScriptedTransport([]), executor(workspace), model="m")
    assert confined.workspace is not None and confined.workspace.root == workspace
