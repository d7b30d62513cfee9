"""What the newcomer's tour of the README found misleading (issue 25, the second tour): each
through the real ``rune`` command in a subprocess, the model scripted (``--backend scripted``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.fakes.cli import call, final, rune, scripted_demo_steps


def test_config_piped_prints_whole_values(home: Path) -> None:
    deep = home / ("a-rather-long-directory-name-" * 6) / "project"
    deep.mkdir(parents=True)
    done = rune(home, "config", "--workspace", str(deep), "--write-root", str(deep / "out"))
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert str(deep) in rows["workspace"].split()
    assert rows["workspace"].endswith("flag --workspace")
    assert str(deep / "out") in rows["sandbox.write_roots"]


def test_sessions_show_of_a_waiting_session_ends_with_how_to_resume_it(home: Path) -> None:
    waiting = rune(home, "demo", "--backend", "scripted")  # no answer on stdin: it waits
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    (session_id,) = re.findall(r"rune resume (\d{8}-\d{6}-[0-9a-f]+)", waiting.stderr)
    shown = rune(home, "sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    last = shown.stdout.strip().splitlines()[-1]
    assert f"`rune resume {session_id}`" in last and "approval is waiting" in last


def test_tool_lines_say_what_a_write_changed_and_that_a_silent_command_printed_nothing(
    home: Path,
) -> None:
    workspace = home / "work"
    workspace.mkdir()
    (workspace / "calc.py").write_text("a = 1\nb = 2\nc = 3\n", encoding="utf-8")
    common = ("run", "--backend", "scripted", "--workspace", str(workspace), "--yes", "--yes")
    done = rune(
        home,
        *common,
        "change calc.py",
        script=[
            call("write_file", path="calc.py", content="a = 1\nb = 20\nc = 3\nd = 4\n"),
            call("write_file", path="notes.txt", content="one\ntwo\n"),
            call("run_command", command="true"),
            call("read_file", path="notes.txt"),
            final("Changed."),
        ],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip().startswith("✓")]
    assert "✓ write_file done: wrote calc.py (+2 −1)" in lines, lines
    assert "✓ write_file done: created notes.txt (+2)" in lines, lines
    assert "✓ run_command done: no output, exit code 0" in lines, lines
    assert "✓ read_file done: 2 lines" in lines, lines
    assert "of output" not in done.stdout.replace("no output", "")


@pytest.mark.anyio
async def test_a_session_started_in_the_tui_is_titled_by_its_first_task(tmp_path: Path) -> None:
    from rune.app import open_rune, session_store
    from rune.settings.config import load
    from rune.tui import RuneApp

    workspace = tmp_path / "ws"
    workspace.mkdir()
    loaded = load(
        {"backend": "scripted", "workspace": str(workspace)},
        env={"RUNE_SCRIPT": ""},
        user_file=tmp_path / "no-user-config.toml",
    )
    # As `rune` alone opens it: no task yet, so no title.
    with open_rune(loaded, title="") as opened:
        app = RuneApp(opened)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            await pilot.press(*"say hello", "enter")

            def title() -> str:
                (listed,) = [s for s in session_store().list() if s.id == opened.session_id]
                return listed.title

            for _ in range(100):  # the task is journaled as the turn starts
                if title():
                    break
                await pilot.pause(0.05)
            assert title() == "say hello"
            await pilot.press("ctrl+q")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_passing_test_run_says_so_on_its_tool_line(home: Path) -> None:
    workspace = home / "work"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "test_calc.py").write_text(
        "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    fixed = "def add(a, b):\n    return a + b\n"
    done = rune(
        home,
        *("run", "--backend", "scripted", "--workspace", str(workspace), "--yes", "fix calc.py"),
        script=[call("write_file", path="calc.py", content=fixed), final("Fixed.")],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ run_tests done: the tests pass" in done.stdout, done.stdout


def test_a_command_approval_says_how_it_runs_in_one_short_line(home: Path) -> None:
    script = [call("run_command", command="python3 -m platform"), final()]
    done = rune(home, "run", "--backend", "scripted", "go", script=script, stdin="a\n")
    assert done.returncode == 0, done.stdout + done.stderr
    approval = done.stdout[done.stdout.index("Approval needed") : done.stdout.index("approve?")]
    lines = [line.strip() for line in approval.splitlines()][1:]
    assert lines[0] == "$ python3 -m platform"
    assert len(lines) == 2 and len(lines[1]) <= 120, lines
    assert "contained" in lines[1].lower() and "timeout 120 s" in lines[1]


def test_continue_after_the_scripted_demo_says_the_script_is_spent_and_keeps_the_session(
    home: Path,
) -> None:
    """The tour: reject the scripted demo's fix (exit 4, "answered, but not finished"), then
    type the next step it offers, `rune resume ID --continue`."""
    first = rune(home, "run", "--backend", "scripted", "fix calc.py", stdin="r not like that\n")
    assert first.returncode == 4, first.stdout + first.stderr
    (session_id,) = set(re.findall(r"rune resume (\d{8}-\d{6}-[0-9a-f]+) --continue", first.stdout))
    again = rune(home, "resume", session_id, "--continue")
    assert again.returncode == 1, again.stdout + again.stderr
    outcome, then = again.stdout.strip().splitlines()[-2:]
    assert outcome.startswith("✗ BackendUnavailable: the scripted backend"), again.stdout
    assert "every turn" in outcome and "ProtocolError" not in again.stdout
    assert f"session {session_id} is kept" in then and "with `--backend ollama`" in then
    assert "tries again from the last good point" not in again.stdout
    listed = rune(home, "sessions").stdout
    assert f"{session_id}  incomplete" in listed, listed  # as it was: nothing ran


def test_the_readme_opens_with_the_two_commands_of_a_clone_and_installs_as_a_tool() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert lines[:2] == ["# Rune", ""] and lines[2] == "```bash"
    block = lines[3 : lines.index("```", 3)]
    commands = [line.split("#")[0].strip() for line in block if not line.startswith("#")]
    assert commands == ["bash scripts/demo", "bash scripts/test"]
    assert "in a clone" in block[0]
    install = readme[readme.index("## Install") :]
    first = re.search(r"```bash\n(?:.*#.*\n)*?(\w+ (?:tool )?install [^\n]*)", install)
    assert first is not None and first.group(1).startswith(("pipx install", "uv tool install"))
    assert len(lines) <= 160


def test_rune_with_options_and_no_task_on_a_terminal_opens_the_interface(home: Path) -> None:
    """The tour: `rune --backend scripted` (a flag, no task) said "the following arguments
    are required: task" where `rune` alone opens the interface."""
    import os
    import sys
    import time

    from tests.fakes.terminal import Terminal

    environment = {**os.environ, "HOME": str(home), "TERM": "xterm-256color"}
    term = Terminal(
        [sys.executable, "-m", "rune.cli", "--backend", "scripted"], env=environment, cwd=home
    )
    try:
        term.expect("scripted-demo")
        time.sleep(1)
        term.send("\x11")  # Ctrl-Q
        assert term.wait() == 0
    finally:
        term.close()
    assert "required: task" not in term.output


def test_undo_takes_back_the_last_change_even_after_a_run_that_changed_nothing(
    home: Path,
) -> None:
    workspace = home / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("old\n")
    fix = [call("write_file", path="notes.txt", content="new\n"), final("Changed.")]
    common = ("run", "--backend", "scripted", "--workspace", str(workspace), "--yes")
    assert rune(home, *common, "change the note", script=fix).returncode == 0
    question = rune(home, *common, "what is in it?", script=[final("It says new.")])
    assert question.returncode == 0, question.stdout + question.stderr
    undone = rune(home, "undo", "--workspace", str(workspace))
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (workspace / "notes.txt").read_text() == "old\n"
    redone = rune(home, "redo", "--workspace", str(workspace))
    assert redone.returncode == 0, redone.stdout + redone.stderr
    assert (workspace / "notes.txt").read_text() == "new\n"


def test_ctrl_c_while_an_approved_command_runs_leaves_the_session_interrupted(home: Path) -> None:
    """Item e of the tour: a run stopped by Ctrl-C after its approval was answered is listed
    as interrupted, not as waiting for an approval (not reproduced on this branch's base: a
    guard)."""
    import json
    import os
    import sys
    import time

    from tests.fakes.terminal import Terminal

    script = home.parent / "sleep.json"
    script.write_text(json.dumps([call("run_command", command="sleep 20"), final("ok")]))
    environment = {
        **os.environ,
        "HOME": str(home),
        "TERM": "xterm-256color",
        "RUNE_SCRIPT": str(script),
    }
    argv = [sys.executable, "-m", "rune.cli", "run", "--backend", "scripted", "wait"]
    term = Terminal(argv, env=environment, cwd=home)
    try:
        term.expect(r"approve\?")
        term.send("a\r")
        time.sleep(1.5)  # the command runs
        term.send("\x03")
        assert term.wait() == 130, term.output
    finally:
        term.close()
    listed = rune(home, "sessions").stdout
    assert " interrupted " in listed and "pending approval" not in listed, listed


def test_a_demo_whose_fix_was_rejected_says_why_it_is_not_checked(home: Path) -> None:
    done = rune(home, "demo", "--backend", "scripted", stdin="r not like that\n")
    last = done.stdout.strip().splitlines()[-1]
    if scripted_demo_steps(home) == 2:  # checks run contained: the demo's own runs unasked
        assert done.returncode == 1, done.stdout + done.stderr
        assert last.startswith(
            "✗ not fixed: add(2, 3) is still wrong: the last change was rejected (not like that)"
        ), last
    else:  # the check is a command, and stdin has no answer for it
        assert done.returncode == 4, done.stdout + done.stderr
        assert last.startswith("? not checked: the last change was rejected (not like that)"), last
