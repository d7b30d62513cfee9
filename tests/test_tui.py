"""``rune tui`` driven through Textual's Pilot, on agents built by the real composition root."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.ollama_server import FakeModel, FakeOllama, Reply, text_reply
from textual.widgets import Input

from rune.app import Rune, ScriptedBackend, open_rune, sandbox_policy
from rune.app.demo import BROKEN_CALC, DEMO_TASK, FIXED_CALC, scripted_demo_transport
from rune.frontend.view import diff_text
from rune.operator import RuneOperator
from rune.settings.config import load
from rune.tools.executor import ToolExecutor
from rune.tui import RuneApp
from rune.tui.approval import ApprovalScreen
from rune.tui.widgets import ToolLine


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
        ScriptedBackend("configured"),
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


# --- control parity with the CLI (issue 25) -------------------------------------------------


def scripted_turns(monkeypatch: pytest.MonkeyPatch, workspace: Path, turns: list[Any]) -> None:
    import json

    script = workspace.parent / "script.json"
    script.write_text(json.dumps(turns))
    monkeypatch.setenv("RUNE_SCRIPT", str(script))


def command_turn(command: str) -> dict[str, Any]:
    call = {"name": "run_command", "arguments": {"command": command}}
    return {"content": "", "tool_calls": [{"function": call}]}


def processes_with(marker: str) -> list[int]:
    """The live processes whose command line holds ``marker`` (zombies do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z" and "pytest" not in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.anyio
async def test_esc_kills_a_running_command_and_everything_it_started_in_under_2_s(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    # Two sleeps: one in the background, so the whole tree must die, not only the shell.
    marker = "31.4159"
    scripted_turns(
        monkeypatch,
        workspace,
        [command_turn(f"sleep {marker} & sleep {marker}; wait"), {"content": "never asked"}],
    )
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task="wait a while")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            await pilot.press("a")
            await until(pilot, lambda: len(processes_with(marker)) >= 2, "the sleeps")
            started = time.monotonic()
            await pilot.press("escape")
            [line] = list(app.query(ToolLine))
            await until(pilot, lambda: line.status == "failed", "the stopped tool line")
            assert not processes_with(marker)
            assert time.monotonic() - started < 2
            assert "stopped by the user" in str(line.title)
            await until(pilot, lambda: not app.busy, "the end of the call")
            assert "stopped" in notes(app)


@pytest.mark.anyio
async def test_ctrl_q_at_a_pending_approval_says_how_to_resume(workspace: Path) -> None:
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task=DEMO_TASK)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            await pilot.press("escape")  # left for later: the approval still waits
            await until(pilot, lambda: "left for later" in notes(app), "the note")
            await pilot.press("ctrl+q")
        session_id = rune.session_id
    assert app.return_code == 0
    assert f"`rune resume {session_id}`" in app.farewell
    assert "approval is waiting" in app.farewell


def test_rune_tui_prints_the_resume_line_after_ctrl_q_on_a_terminal(tmp_path: Path) -> None:
    import os
    import sys

    from tests.fakes.cli import closed_port
    from tests.fakes.terminal import Terminal

    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    (home / "work" / "calc.py").write_text(BROKEN_CALC)
    env = {
        **os.environ,
        "HOME": str(home),
        "OLLAMA_HOST": f"127.0.0.1:{closed_port()}",
        "TERM": "xterm-256color",
    }
    argv = [sys.executable, "-m", "rune.cli", "tui", "--backend", "scripted", DEMO_TASK]
    term = Terminal(argv, env=env, cwd=home / "work")
    try:
        term.expect("Approval needed", timeout=60)
        term.send("\x11")  # ctrl+q
        assert term.wait(timeout=30) == 0
        found = term.expect(r"the session (\S+) is kept: `rune resume (\S+)`")
        assert found.group(1) == found.group(2)
    finally:
        term.close()


@pytest.mark.anyio
async def test_slash_commands_run_in_rune_and_never_reach_the_model(workspace: Path) -> None:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(text_reply("Hello."))
        with silent_server_rune(workspace, server) as rune:
            app = RuneApp(rune)
            async with app.run_test(size=(120, 40)) as pilot:
                await until(pilot, lambda: not app.busy, "the start")
                prompt = app.query_one("#prompt", Input)
                await pilot.press(*"/he")
                await pilot.press("right")  # the suggestion completes the command
                assert prompt.value == "/help"
                await pilot.press("enter")
                await until(pilot, lambda: "/diff" in notes(app), "the help")
                await pilot.press(*"/model", "enter")
                await until(pilot, lambda: "qwen3:latest via" in notes(app), "the model line")
                await pilot.press(*"/sessions", "enter")
                await until(pilot, lambda: rune.session_id in notes(app), "the sessions")
                await pilot.press(*"/diff", "enter")
                await until(pilot, lambda: "no change applied" in notes(app), "the diff")
                await pilot.press(*"/frobnicate", "enter")
                await until(pilot, lambda: "unknown command /frobnicate" in notes(app), "error")
                assert not app.busy
                await pilot.press(*"/clear", "enter")
                await until(pilot, lambda: not notes(app), "a clear screen")
                await pilot.press(*"//etc is a path", "enter")
                await until(pilot, lambda: "✓" in notes(app), "the task's end")
                await pilot.press(*"/quit", "enter")
        # The model saw one task, the one sent with "//", and none of the commands.
        sent = [m["content"] for b in server.bodies() for m in b["messages"] if m["role"] == "user"]
        assert sent == ["/etc is a path"]
    assert app.return_code == 0


@pytest.mark.anyio
async def test_the_header_fits_80_columns(workspace: Path) -> None:
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task=DEMO_TASK)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            line = header(app)
            assert len(line) <= 78, line  # 80 columns, less the padding
            assert "step 2/8" in line and "waiting for approval" in line
            assert "scripted-demo" in line
        async with RuneApp(rune).run_test(size=(200, 24)) as pilot:
            wide = header(pilot.app)
            assert f"session {rune.session_id}" in wide and "ctx" in wide


@pytest.mark.anyio
async def test_diff_shows_the_changes_applied_and_undo_takes_back_the_last(
    workspace: Path,
) -> None:
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task=DEMO_TASK)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            await pilot.press("a")
            await until(pilot, lambda: "✓ done" in notes(app), "the end of the turn")
            assert (workspace / "calc.py").read_text() == FIXED_CALC
            await pilot.press(*"/diff", "enter")
            await until(pilot, lambda: bool(app.query(".diff")), "the diff")
            shown = str(app.query(".diff").last().render())
            assert "+++ b/calc.py" in shown and "+    return a + b" in shown
            await pilot.press(*"/undo", "enter")
            await until(pilot, lambda: "restored calc.py" in notes(app), "the undo")
            assert (workspace / "calc.py").read_text() == BROKEN_CALC
            await pilot.press(*"/undo", "enter")
            await until(pilot, lambda: "undo refused: nothing to undo" in notes(app), "refusal")


@pytest.mark.anyio
async def test_a_command_approval_reads_once_and_s_allows_the_prefix_for_the_session(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted_turns(
        monkeypatch,
        workspace,
        [
            command_turn("python3 -m platform"),
            command_turn("python3 -m platform --terse"),
            {"content": "Both ran."},
        ],
    )
    with scripted_rune(workspace) as rune:
        app = RuneApp(rune, task="run it twice")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: approval_shown(app), "approval")
            screen = app.screen
            shown = "\n".join(str(w.render()) for w in screen.query("Label, Static"))
            assert shown.count("$ python3 -m platform") == 1, shown
            assert shown.count("Contained (bubblewrap)") + shown.count("NOT contained") == 1
            assert "$ $" not in shown
            assert "allow commands that begin `python3 -m platform` for this session" in shown
            await pilot.press("s")
            await until(pilot, lambda: "✓" in notes(app) and not app.busy, "the end")
            assert "approved: commands that begin `python3 -m platform` are allowed" in notes(app)
            assert [line.status for line in app.query(ToolLine)] == ["done", "done"]
