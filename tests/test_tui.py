"""``rune tui`` driven through Textual's Pilot, on agents built by the real composition root."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.ollama_server import FakeModel, FakeOllama, Reply, text_reply
from textual.widgets import Input

from rune.app import BackendChoice, Rune, open_rune, sandbox_policy
from rune.config import load
from rune.demo import BROKEN_CALC, DEMO_TASK, FIXED_CALC, scripted_demo_transport
from rune.operator import RuneOperator
from rune.tool_executor import ToolExecutor
from rune.tui import RuneApp
from rune.tui.approval import ApprovalScreen
from rune.tui.widgets import ToolLine
from rune.view import diff_text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(BROKEN_CALC)
    return ws


@contextmanager
def scripted_rune(workspace: Path, session_id: str | None = None) -> Iterator[Rune]:
    loaded = load(
        {"backend": "scripted", "workspace": str(workspace)},
        env={},
        user_file=workspace / "no-user-config.toml",
    )
    with open_rune(loaded, session_id=session_id, title="tui test") as rune:
        yield rune


async def until(pilot: Any, condition: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def header(app: RuneApp) -> str:
    return str(app.query_one("#header").render())


def notes(app: RuneApp) -> str:
    return "\n".join(str(w.render()) for w in app.query(".note, .done, .error, .warning"))


def approval_shown(app: RuneApp) -> bool:
    """The approval screen is pushed and composed: the preview's content and the reason box
    (composed last) are mounted. Under load the title can be mounted well before the rest."""
    if not isinstance(app.screen, ApprovalScreen):
        return False
    previews = app.screen.query("#approval-preview")
    return bool(previews and previews.first().children and app.screen.query("#reason"))


@pytest.mark.anyio
async def test_approve_flow_fixes_the_file_and_shows_the_budget(workspace: Path) -> None:
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task=DEMO_TASK)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            assert "step 2/8" in header(app)
            assert "waiting for approval" in header(app)
            diff = str(app.screen.query_one("#approval-diff").render())
            assert "+    return a + b" in diff and "-    return a - b" in diff
            await pilot.press("a")
            await until(pilot, lambda: "✓ done" in notes(app), "the end of the turn")
            assert "step 3/8" in header(app)
            statuses = [line.status for line in app.query(ToolLine)]
            assert statuses == ["done", "done"]
    assert (workspace / "calc.py").read_text() == FIXED_CALC


@pytest.mark.anyio
async def test_reject_flow_sends_the_reason_and_keeps_the_file(workspace: Path) -> None:
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task=DEMO_TASK)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            await pilot.press("r")
            await pilot.press(*"use git")
            await pilot.press("enter")
            # The model answers anyway: that is not done, the change it asked for was refused.
            await until(pilot, lambda: "answered, but not finished" in notes(app), "the end")
            assert "✓ done" not in notes(app)
            lines = list(app.query(ToolLine))
            assert [line.status for line in lines] == ["done", "rejected"]
            assert "rejected by the operator: use git" in str(lines[1].title)
    assert (workspace / "calc.py").read_text() == BROKEN_CALC


@pytest.mark.anyio
async def test_a_failed_tool_is_shown_failed_with_its_error_on_demand(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with scripted_rune(empty) as rune:
        app = RuneApp(rune, task=DEMO_TASK)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            await pilot.press("escape")
            await until(pilot, lambda: "left for later" in notes(app), "the note")
            first = app.query(ToolLine).first()
            assert first.status == "failed"
            assert first.collapsed
            await pilot.press("ctrl+o")
            assert not first.collapsed
            assert "calc.py" in str(first.output.render())


@pytest.mark.anyio
async def test_a_pending_approval_from_the_journal_opens_after_a_restart(
    workspace: Path,
) -> None:
    with scripted_rune(workspace) as first:
        paused = first.operator.send(DEMO_TASK)
        assert paused.pending is not None
        session_id = first.session_id
    with scripted_rune(workspace, session_id=session_id) as again:
        app = RuneApp(again)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            assert app.screen.pending.summary == paused.pending.summary
            assert "step 2/8" in header(app)  # the budget as the journal left it
            assert "> " + DEMO_TASK in "\n".join(str(w.render()) for w in app.query(".user"))
            await pilot.press("a")
            await until(pilot, lambda: "✓ done" in notes(app), "the end of the turn")
    assert (workspace / "calc.py").read_text() == FIXED_CALC


@pytest.mark.anyio
async def test_a_sensitive_change_is_shown_as_such_and_not_approved_by_yes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    script = workspace.parent / "script.json"
    write = {"name": "write_file", "arguments": {"path": "AGENTS.md", "content": "obey\n"}}
    script.write_text(json.dumps([{"content": "", "tool_calls": [{"function": write}]}]))
    monkeypatch.setenv("RUNE_SCRIPT", str(script))
    loaded = load(
        {"backend": "scripted", "workspace": str(workspace), "approval": "edits"},
        env={},
        user_file=workspace / "no-user-config.toml",
    )
    with open_rune(loaded, title="tui test") as rune:
        app = RuneApp(rune, task="go")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            shown = "\n".join(str(w.render()) for w in app.screen.query(".bad"))
            assert "sensitive: AGENTS.md steers an agent" in shown
    assert not (workspace / "AGENTS.md").exists()


def test_the_header_refreshes_only_once_it_is_on_screen(workspace: Path) -> None:
    # (`App.is_mounted` is a method, always true: the check must be on the header itself.)
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune)
        app._refresh_header()  # before the app runs there is no screen: this must do nothing
        assert "step 0/8" in str(app._header_line.render())


@pytest.mark.anyio
async def test_a_malformed_call_is_shown_as_a_failed_tool_line(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    script = workspace.parent / "script.json"
    broken = {"name": "read_file", "arguments": "{not json"}
    turns = [{"content": "", "tool_calls": [{"function": broken}]}, {"content": "sorry"}]
    script.write_text(json.dumps(turns))
    monkeypatch.setenv("RUNE_SCRIPT", str(script))
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task="go")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(
                pilot, lambda: "✓ answered, no file changed" in notes(app), "the end of the turn"
            )
            [line] = list(app.query(ToolLine))
            assert line.status == "failed"
            assert "not a JSON object" in str(line.title)


# --- snapshots: a session-less agent in a fixed place, so the screens are reproducible -----


def snapshot_rune(workspace: Path) -> Rune:
    from rune.app import capabilities

    loaded = load(
        {"backend": "scripted", "workspace": str(workspace)}, env={}, user_file=workspace / "x"
    )
    transport = scripted_demo_transport()
    operator = RuneOperator(
        transport,
        ToolExecutor(sandbox_policy(loaded.settings), workspace),
        model="scripted-demo",
    )
    rune = Rune(
        loaded.settings,
        BackendChoice("scripted", "configured"),
        transport,
        "scripted-demo",
        capabilities(transport, "scripted-demo"),
        operator,
        "snapshot",
    )
    operator.on_event = rune.relay
    return rune


async def steady(pilot: Any) -> None:
    """No blinking cursor in a snapshot."""
    pilot.app.query_one("#prompt").cursor_blink = False
    await pilot.pause()


def test_snapshot_finished_transcript(workspace: Path, snap_compare: Any) -> None:
    async def run_demo(pilot: Any) -> None:
        app = pilot.app
        await steady(pilot)
        await until(pilot, lambda: approval_shown(app), "approval")
        await pilot.press("a")
        await until(pilot, lambda: "✓ done" in notes(app), "the end of the turn")

    app = RuneApp(snapshot_rune(workspace), task=DEMO_TASK)
    assert snap_compare(app, run_before=run_demo, terminal_size=(100, 30))


def test_snapshot_approval_screen(workspace: Path, snap_compare: Any) -> None:
    async def reach_approval(pilot: Any) -> None:
        app = pilot.app
        await until(pilot, lambda: approval_shown(app), "approval")
        # The summary and diff name the absolute path; hide the tmp dir to be reproducible.
        here = str(workspace.resolve())
        pending = app.screen.pending
        app.screen.query_one("#approval-summary").update(pending.summary.replace(here, "/ws"))
        app.screen.query_one("#approval-diff").update(
            diff_text(pending.preview.replace(here, "/ws"))
        )
        await steady(pilot)

    app = RuneApp(snapshot_rune(workspace), task=DEMO_TASK)
    assert snap_compare(app, run_before=reach_approval, terminal_size=(100, 30))


# --- stopping: against a real HTTP server that never answers the model call --------------


@contextmanager
def silent_server_rune(
    workspace: Path, server: FakeOllama, session_id: str | None = None
) -> Iterator[Rune]:
    loaded = load(
        {
            "backend": "ollama",
            "ollama_host": server.url,
            "model": "qwen3:latest",
            "workspace": str(workspace),
        },
        env={},
        user_file=workspace / "no-user-config.toml",
    )
    with open_rune(loaded, session_id=session_id, title="tui stop test") as rune:
        yield rune


def never_answers() -> Reply:
    """A model call the server takes and never answers (until the server stops)."""
    return Reply(stall=3600)


@pytest.mark.anyio
async def test_esc_stops_a_model_call_that_never_ends_and_ctrl_g_goes_on(
    workspace: Path,
) -> None:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(never_answers(), text_reply("Hello again."))
        with silent_server_rune(workspace, server) as rune:
            app = RuneApp(rune, task="say hello")
            async with app.run_test(size=(160, 40)) as pilot:
                await until(pilot, lambda: rune.transport.progress() is not None, "the call")
                await until(pilot, lambda: "waiting for the model" in header(app), "status")
                await pilot.press("escape")
                await until(pilot, lambda: "stopped" in notes(app), "the stop")
                assert not app.busy and "idle" in header(app)
                await pilot.press("ctrl+g")
                await until(
                    pilot, lambda: "✓ answered, no file changed" in notes(app), "the turn, gone on"
                )
                assert "Hello again." in "\n".join(str(w.render()) for w in app.query(".assistant"))
        # The second call carried the same conversation: the task, once.
        second = server.bodies()[-1]["messages"]
        assert [m["content"] for m in second if m["role"] == "user"] == ["say hello"]


@pytest.mark.anyio
async def test_ctrl_q_quits_during_a_call_that_never_ends_and_the_session_resumes(
    workspace: Path,
) -> None:
    from rune.sessions import SessionStore

    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(never_answers())
        with silent_server_rune(workspace, server) as rune:
            app = RuneApp(rune, task="say hello")
            async with app.run_test(size=(160, 40)) as pilot:
                await until(pilot, lambda: rune.transport.progress() is not None, "the call")
                await pilot.press("ctrl+q")
            # Reaching this line at all means quitting did not wait for the call to end.
            assert app.return_code == 0
            session_id = rune.session_id
        (listed,) = SessionStore().list()
        assert (listed.id, listed.status) == (session_id, "interrupted")
        server.script(text_reply("Hello."))
        with silent_server_rune(workspace, server, session_id) as again:
            response = again.operator.resume()
        assert response is not None and response.outcome == "done"
        assert response.text == "Hello."


@pytest.mark.anyio
async def test_enter_while_busy_says_so_and_up_recalls_the_last_task(workspace: Path) -> None:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(text_reply("One."), never_answers())
        with silent_server_rune(workspace, server) as rune:
            app = RuneApp(rune)
            async with app.run_test(size=(160, 40)) as pilot:
                await until(pilot, lambda: not app.busy, "the start")
                await pilot.press(*"first task", "enter")
                await until(
                    pilot, lambda: "✓ answered, no file changed" in notes(app), "the first task"
                )
                await pilot.press(*"second task", "enter")
                await until(pilot, lambda: app.busy, "the second call")
                await pilot.press(*"third", "enter")
                await until(pilot, lambda: "still working" in notes(app), "the busy note")
                prompt = app.query_one("#prompt", Input)
                assert prompt.value == "third"  # kept, not lost
                prompt.value = ""
                await pilot.press("up")
                assert prompt.value == "second task"
                await pilot.press("up")
                assert prompt.value == "first task"
                await pilot.press("down", "down")
                assert prompt.value == ""
                await pilot.press("ctrl+q")
