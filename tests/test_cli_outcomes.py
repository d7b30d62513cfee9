"""What ``rune`` says and how it exits, for each way a run can end (issue 11), through the
real command in a subprocess against a real HTTP server speaking Ollama's wire format."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes.cli import rune, scripted_demo_steps, session_of
from tests.fakes.ollama_server import (
    FakeModel,
    FakeOllama,
    error_reply,
    final,
    reply,
    text_reply,
    tool_call,
    tool_reply,
)

from rune.cli import (
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_LIMIT,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_USAGE,
)


@pytest.fixture
def workspace(home: Path) -> Path:
    path = home / "work"
    path.mkdir()
    (path / "notes.txt").write_text("old\n", encoding="utf-8")
    return path


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        yield server


def run(
    home: Path, ollama: FakeOllama, workspace: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return rune(
        home,
        "run",
        "--workspace",
        str(workspace),
        *args,
        stdin=stdin,
        env={"OLLAMA_HOST": ollama.url},
    )


def test_a_named_model_no_backend_serves_is_an_error_with_the_way_out(home: Path) -> None:
    done = rune(home, "run", "--model", "qwen3:14b", "fix calc.py")
    assert done.returncode == EXIT_FAILED
    assert done.stdout.startswith("✗ BackendUnavailable: ")  # the outcome line, as any failure
    assert "done" not in done.stdout
    assert "cannot run 'qwen3:14b' itself" in done.stdout
    for way_out in ("ollama serve", "rune pull", "--backend"):
        assert way_out in done.stdout


def test_a_model_rune_picked_is_said_on_the_first_lines(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    ollama.script(text_reply("Nothing to do."))
    done = run(home, ollama, workspace, "look around")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert first == "rune · qwen3:latest via ollama"
    assert "no model named" in second and "--model NAME" in second


def test_a_rejected_change_then_an_answer_is_not_done(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    ollama.script(
        tool_reply(tool_call("write_file", {"path": "notes.txt", "content": "new\n"})),
        text_reply("I changed notes.txt."),
    )
    done = run(home, ollama, workspace, "change the note", stdin="r keep it\n")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert "✓ done" not in done.stdout
    assert "answered, but not finished: the last change was rejected (keep it)" in done.stdout
    assert (workspace / "notes.txt").read_text() == "old\n"
    listed = rune(home, "sessions").stdout
    assert "incomplete" in listed and str(workspace) in listed


def test_a_failed_write_then_an_answer_is_not_done(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    ollama.script(
        tool_reply(tool_call("write_file", {"path": "/etc/rune-nope.txt", "content": "x\n"})),
        text_reply("Done."),
        text_reply("Done, really."),  # the one reminder after a failed change
    )
    done = run(home, ollama, workspace, "write outside", "--yes")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert "answered, but not finished: the last change failed" in done.stdout
    assert "✓ done" not in done.stdout


def test_an_answer_cut_off_at_the_token_limit_is_not_done(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    # asked again twice (rune.assists.reask), cut off each time
    ollama.script(*[reply(final("The fix is to change", done_reason="length"))] * 3)
    done = run(home, ollama, workspace, "explain")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert "cut off at the output token limit" in done.stdout


@pytest.mark.parametrize(
    ("where", "said"), [("nonexistent/dir", "does not exist"), ("a-file", "is not a directory")]
)
def test_a_workspace_that_is_no_directory_is_refused_before_anything_runs(
    home: Path, ollama: FakeOllama, where: str, said: str
) -> None:
    (home / "a-file").write_text("not a directory\n")
    done = run(home, ollama, home / where, "fix it")
    assert done.returncode == EXIT_USAGE
    assert done.stderr.strip() == f"config error: the workspace {home / where} {said}" + (
        "; create it or pick another" if said == "does not exist" else ""
    )
    assert ollama.count("/api/chat") == 0
    assert rune(home, "sessions").stdout.strip() == "no sessions yet"


def test_the_demo_reports_its_check_as_the_outcome(home: Path) -> None:
    done = rune(home, "demo", "--backend", "scripted", "--yes", "--yes")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    # Where checks run contained, Rune runs the demo's test_calc.py itself after the change and
    # the run ends when it passes: the scripted model's own check is never asked for.
    steps = scripted_demo_steps(home)
    assert last.startswith(f"✓ fixed: add(2, 3) == 5 now (step {steps}/8")
    assert ("run_tests tests='test_calc.py'  [by Rune]" in done.stdout) == (steps == 2)
    assert "✓ done" not in done.stdout


def test_the_demo_with_edits_approved_and_no_terminal_ends_fixed_where_checks_are_contained(
    home: Path,
) -> None:
    # `bash scripts/demo --yes` with no terminal: the demo's own check imports calc.py, which
    # the model wrote. Where checks run contained it runs read-only like the tests Rune ran, so
    # nothing is asked and the demo ends fixed; elsewhere it is a command that needs an answer.
    done = rune(home, "demo", "--backend", "scripted", "--yes", stdin="")
    last = done.stdout.strip().splitlines()[-1]
    if scripted_demo_steps(home) == 2:
        assert done.returncode == EXIT_OK, done.stdout + done.stderr
        assert last.startswith("✓ fixed: add(2, 3) == 5 now (step 2/8")
        assert "Approval needed: run a command" not in done.stdout
    else:
        assert last.startswith("? not checked"), done.stdout + done.stderr
        assert "no answer on stdin" in done.stderr


def test_the_demo_check_failing_is_the_outcome(home: Path) -> None:
    # The change is rejected, the scripted model answers anyway, the check is approved.
    done = rune(home, "demo", "--backend", "scripted", stdin="r no\na\n")
    assert done.returncode == EXIT_FAILED
    assert done.stdout.strip().splitlines()[-1].startswith("✗ not fixed: add(2, 3) is still wrong")


def test_a_budget_of_one_turn_is_said_in_the_singular(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    ollama.script(tool_reply(tool_call("read_file", {"path": "notes.txt"})))
    stopped = run(home, ollama, workspace, "read the note", "--max-iterations", "1")
    assert stopped.returncode == EXIT_LIMIT, stopped.stdout + stopped.stderr
    assert "the model used its 1 iteration without a final answer" in stopped.stdout
    assert "the budget of 1 model turn is spent" in stopped.stdout


def test_the_iteration_limit_then_continue_runs_a_fresh_budget(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    read = tool_call("read_file", {"path": "notes.txt"})
    ollama.script(tool_reply(read), tool_reply(read))
    stopped = run(home, ollama, workspace, "read the note", "--max-iterations", "2")
    assert stopped.returncode == EXIT_LIMIT, stopped.stdout + stopped.stderr
    session = session_of(stopped)
    assert f"rune resume {session} --continue" in stopped.stdout
    assert "iteration limit" in rune(home, "sessions").stdout

    plain = rune(home, "resume", session, env={"OLLAMA_HOST": ollama.url})
    assert plain.returncode == EXIT_OK
    assert "--continue" in plain.stdout

    ollama.script(text_reply("The note says old."))
    going = rune(home, "resume", session, "--continue", env={"OLLAMA_HOST": ollama.url})
    assert going.returncode == EXIT_OK, going.stdout + going.stderr
    assert "── step 1/8 ──" in going.stdout  # a new run, with its own budget
    assert "✓ answered, no file changed (step 1/8)" in going.stdout
    # The model saw the whole conversation: the task and both reads.
    last = ollama.bodies()[-1]["messages"]
    assert [m["role"] for m in last if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def test_a_failed_session_is_retried_by_resume(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    ollama.script(error_reply(500, "out of memory"))
    failed = run(home, ollama, workspace, "say hi")
    assert failed.returncode == EXIT_FAILED
    session = session_of(failed)
    assert f"rune resume {session}" in failed.stdout
    assert "failed" in rune(home, "sessions").stdout

    ollama.script(text_reply("hi"))
    retried = rune(home, "resume", session, env={"OLLAMA_HOST": ollama.url})
    assert retried.returncode == EXIT_OK, retried.stdout + retried.stderr
    assert "✓ answered, no file changed (step 1/8)" in retried.stdout
    assert " done " in rune(home, "sessions").stdout


def test_a_waiting_approval_is_exit_3(home: Path, ollama: FakeOllama, workspace: Path) -> None:
    ollama.script(tool_reply(tool_call("write_file", {"path": "notes.txt", "content": "x\n"})))
    done = run(home, ollama, workspace, "change it")
    assert done.returncode == EXIT_PENDING
    assert "pending approval" in rune(home, "sessions").stdout


# --- sessions: list, show, rm, prune; pipes and closed descriptors --------------------------


def test_sessions_show_prints_every_output_in_full_and_rm_and_prune_delete(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    printed = "".join(f"line {n}\n" for n in range(40))
    (workspace / "long.txt").write_text(printed, encoding="utf-8")
    ollama.script(
        tool_reply(tool_call("run_command", {"command": "cat long.txt"})),
        text_reply("It has 40 lines."),
    )
    done = run(home, ollama, workspace, "count the lines", "--yes", "--yes")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    # The run shows the first and last lines, and how to see the rest.
    assert "│ line 0" in done.stdout and "│ line 39" in done.stdout
    assert "│ line 20" not in done.stdout
    session = session_of(done)
    assert f"`rune sessions show {session}` shows all" in done.stdout

    shown = rune(home, "sessions", "show", session)
    assert shown.returncode == EXIT_OK
    for n in range(40):
        assert f"│ line {n}\n" in shown.stdout
    assert "> count the lines" in shown.stdout and "It has 40 lines." in shown.stdout

    kept = run(home, ollama, workspace, "again")  # no reply left: a failed session
    assert rune(home, "sessions").stdout.count("\n") == 2
    pruned = rune(home, "sessions", "prune", "--days", "0")
    assert "removed 2 sessions" in pruned.stdout
    assert rune(home, "sessions").stdout.strip() == "no sessions yet"
    gone = rune(home, "sessions", "rm", session_of(kept))
    assert gone.returncode == EXIT_USAGE and "no session" in gone.stderr


def test_a_pending_session_is_not_pruned_and_rm_removes_it(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    ollama.script(tool_reply(tool_call("write_file", {"path": "a.txt", "content": "x\n"})))
    waiting = run(home, ollama, workspace, "write")
    assert waiting.returncode == EXIT_PENDING
    assert "removed 0 sessions" in rune(home, "sessions", "prune", "--days", "0").stdout
    removed = rune(home, "sessions", "rm", session_of(waiting))
    assert removed.returncode == EXIT_OK
    assert rune(home, "sessions").stdout.strip() == "no sessions yet"


def test_output_piped_to_a_reader_that_stops_is_quiet(home: Path) -> None:
    for _ in range(3):
        assert rune(home, "demo", "--backend", "scripted", "--yes").returncode == EXIT_OK
    piped = subprocess.run(
        f"{sys.executable} -m rune.cli sessions | head -1; echo status=${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=60,
        check=False,
    )
    assert piped.stderr == ""
    assert piped.stdout.count("\n") == 2
    assert re.search(r"status=(0|141)$", piped.stdout.strip())


def test_closed_stdin_and_a_non_utf8_config_are_one_line_errors(home: Path) -> None:
    closed = subprocess.run(
        f"{sys.executable} -m rune.cli demo --backend scripted <&-",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "NO_COLOR": "1"},
        timeout=60,
        check=False,
    )
    assert "Traceback" not in closed.stdout + closed.stderr
    assert closed.returncode == EXIT_PENDING
    assert "stdin gave no answer" in closed.stderr

    config = Path(os.environ["XDG_CONFIG_HOME"]) / "rune" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(b'model = "caf\xe9"\n')
    bad = rune(home, "config")
    assert bad.returncode == EXIT_USAGE
    assert "not UTF-8" in bad.stderr and str(config) in bad.stderr


# --- context: a server that does not report its window ----------------------------------


def test_a_file_too_big_for_an_unknown_window_is_cut_with_a_paging_note(home: Path) -> None:
    from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply

    workspace = home / "big"
    workspace.mkdir()
    text = "".join(
        f"value_{n} = {n * 7919 % 1000003}  # a line of the big module\n" for n in range(480)
    )
    assert len(text) > 21_000
    (workspace / "big.py").write_text(text, encoding="utf-8")
    # No /props, no metadata in /v1/models: the window is unknown.
    listing = {"object": "list", "data": [{"id": "m", "object": "model"}]}
    with FakeOpenAIServer(props=None, models=listing) as server:
        server.script(
            tool_call_reply(("call_1", "read_file", {"path": "big.py"})),
            text_reply("It defines value_0 to value_479."),
        )
        done = rune(
            home,
            "run",
            "--workspace",
            str(workspace),
            "--backend",
            server.base_url + "/v1",
            "--model",
            "m",
            "what is in big.py?",
        )
        second = server.chat_bodies[1]["messages"]
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "ContextOverflow" not in done.stdout + done.stderr
    result = next(m["content"] for m in second if m["role"] == "tool")
    assert "Rune cut this tool output to fit the context window" in result
    assert "offset and limit" in result
    assert result.startswith("     1\tvalue_0 = 0")
    assert len(result) < len(text)
    assert "cut to" in done.stdout  # the user is told too


def test_a_long_diff_is_cut_with_the_count_of_hidden_lines_and_a_command_shows_once(
    home: Path, ollama: FakeOllama, workspace: Path
) -> None:
    content = "".join(f"new line {n}\n" for n in range(400))
    ollama.script(
        tool_reply(tool_call("write_file", {"path": "notes.txt", "content": content})),
        tool_reply(tool_call("run_command", {"command": "wc -l notes.txt"})),
        text_reply("Written."),
    )
    done = run(home, ollama, workspace, "rewrite the note", stdin="a\na\n")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert (workspace / "notes.txt").read_text() == content
    assert re.search(r"… 30\d more lines of this diff not shown …", done.stdout)
    assert "+new line 0" in done.stdout and "+new line 399" in done.stdout
    assert "+new line 200" not in done.stdout
    assert len(done.stdout.splitlines()) < 200
    assert "$ wc -l notes.txt" in done.stdout and "$ $" not in done.stdout
