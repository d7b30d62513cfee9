"""The TUI ends a run with the same outcome line as the CLI (rune.frontend.view.outcome_text), and
Ctrl-G goes on after an unfinished answer (issue 25). Through Textual's Pilot, on an agent
built by the real composition root with the scripted backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.test_tui import notes, until

from rune.app import open_rune
from rune.settings.config import load
from rune.tui import RuneApp


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def command(text: str) -> dict[str, object]:
    return {
        "content": "",
        "tool_calls": [{"function": {"name": "run_command", "arguments": {"command": text}}}],
    }


@pytest.mark.anyio
async def test_a_failed_command_leaves_the_turn_unfinished_with_its_change_and_ctrl_g_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    write = {"name": "write_file", "arguments": {"path": "fixed.txt", "content": "yes\n"}}
    turns = [
        {"content": "", "tool_calls": [{"function": write}]},
        command("exit 3"),
        {"content": "Done."},
        {"content": "Done."},  # the one reminder after a failure, then the answer is taken
        command("exit 0"),
        {"content": "Done now."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    monkeypatch.setenv("RUNE_SCRIPT", str(script))
    loaded = load(
        {"backend": "scripted", "workspace": str(workspace), "approval": "all"},
        env={},
        user_file=tmp_path / "no-user-config.toml",
    )
    with open_rune(loaded, title="tui outcome") as rune:
        app = RuneApp(rune, task="go")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: "not finished" in notes(app), "the unfinished answer")
            kept, verdict = notes(app).splitlines()[-2:]
            # the same line as the CLI's, above the outcome (the test runs outside the workspace)
            assert kept == (
                "the session's file changes stay in place (fixed.txt): "
                f"`rune undo {rune.session_id} --all --workspace {workspace}` takes them back"
            )
            assert verdict == (
                "! answered, but not finished: the last command exited 3 (step 4/8); "
                "ctrl+g goes on with a fresh budget"
            )
            await pilot.press("ctrl+g")
            await until(pilot, lambda: "✓ done" in notes(app), "the turn, gone on")
            assert notes(app).splitlines()[-1] == "✓ done (step 2/8)"
            assert notes(app).count("stay in place") == 1  # a run that is done says nothing
    assert (workspace / "fixed.txt").read_text() == "yes\n"
